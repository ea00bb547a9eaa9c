/**
 * The CA certificates that Certificates policies distribute and that expire soon: the dashboard lists them under
 * "Needs attention", because once one expires the agents stop installing it and the services it vouches for
 * fail on every node. Only released policies that reach at least one node count (`policy_reach`); each
 * certificate is read with the same shared rules the server validates and the agent enforces with.
 */
import { certificatesType, isoDay, trustAnchor } from "../../shared/policy_types/certificates.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import type { Queryable } from "../db/db.ts";

/** One distributed certificate that expires within the window (or has expired). */
export interface ExpiringTrustAnchor {
  policy_id: string;
  policy_name: string;
  /** The entry's name in the policy. */
  name: string;
  subject: string;
  /** The expiry date, `YYYY-MM-DD`. */
  not_after: string;
  expired: boolean;
}

/** Distributed certificates expiring within `withinDays` of `now` (expired ones included), soonest first. */
export async function expiringTrustAnchors(
  q: Queryable,
  options: { withinDays: number; now?: Date },
): Promise<ExpiringTrustAnchor[]> {
  const now = options.now ?? new Date();
  const limit = now.getTime() + options.withinDays * 86_400_000;
  const rows = await q.query<{ id: string; name: string; content: string }>(
    `SELECT p.id, p.name, p.content FROM policies p
      WHERE p.type = 'Certificates' AND p.state = 'released'
        AND EXISTS (SELECT 1 FROM policy_reach r WHERE r.policy_id = p.id)
      ORDER BY p.name, p.id`,
  );
  const out: (ExpiringTrustAnchor & { at: number })[] = [];
  for (const row of rows) {
    let entries: { name: string; pem: string }[];
    try {
      entries = certificatesType.parse(row.content, { ignoreUnknownFields: true }).certificates;
    } catch (err) {
      if (err instanceof PolicyContentError) continue; // released content was valid; nothing to count otherwise
      throw err;
    }
    for (const entry of entries) {
      const info = trustAnchor(entry.pem);
      if (typeof info === "string" || info.notAfter.getTime() > limit) continue;
      out.push({
        policy_id: row.id,
        policy_name: row.name,
        name: entry.name,
        subject: info.subject,
        not_after: isoDay(info.notAfter),
        expired: info.notAfter.getTime() <= now.getTime(),
        at: info.notAfter.getTime(),
      });
    }
  }
  return out.sort((a, b) => a.at - b.at).map(({ at: _at, ...rest }) => rest);
}
