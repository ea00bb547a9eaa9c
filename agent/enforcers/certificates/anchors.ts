/**
 * The Certificates type's trust anchors on the agent: which certificates the policies install and under which
 * names (one merge, used by the Certificates enforcer and by the browsers that carry the certificates in their
 * policy files), and the keys the browsers get. Where the node's system store keeps them is `trust_store.ts`'s.
 *
 * Merge (trust adds up): every certificate of every policy is installed. Entries are taken in the engine's
 * order (priority descending, then policy id): a name belongs to the first entry that uses it (a later entry
 * with another certificate under that name is overridden); a certificate given again under another name is
 * installed once, under its first name; an expired certificate is not installed (reported on its entry).
 *
 * Browsers: Firefox trusts neither the system store nor `/etc/pki/nssdb` on Debian (its built-in roots only;
 * `ImportEnterpriseRoots` works on Windows and macOS), so its policies file lists the anchor files in
 * `Certificates.Install`. Chromium on Debian does not read `/etc/pki/nssdb` either (its NSS is built without
 * nss-sysinit; only the user's `~/.pki/nssdb`), but honours the `CACertificates` policy (base64 DER), so the
 * Chrome family's policy file lists them there. Both facts were checked against Debian 12's firefox-esr and
 * chromium with a test CA (see docs/admin/policy-types/certificates.md). On Fedora/RHEL the system anchors
 * also reach NSS through p11-kit, and the browser keys are harmless repeats.
 *
 * @module
 */

import type { CertificatesPolicy } from "../../../shared/gen/svc/policy/v1/certificates_pb.ts";
import {
  certificatesType,
  checkCertificates,
  expiryProblem,
  trustAnchor,
} from "../../../shared/policy_types/certificates.ts";
import { PolicyContentError } from "../../../shared/policy_types/errors.ts";
import { IssueList } from "../../../shared/policy_types/sanitizers.ts";
import { type CertificateInfo, certificatePem, derBase64 } from "../../../shared/x509.ts";
import { parsePolicyContent } from "../../sync/content.ts";
import type { KeyedValues } from "../../sync/key_merge.ts";
import type { CachedPolicy, ItemResult } from "../../sync/types.ts";
import type { BrowserCompanion } from "../browser_enforcer.ts";
import { overriddenBy, Winners } from "../desktop_enforcer.ts";
import { anchorPath, detectTrustStore } from "./trust_store.ts";

/** One certificate entry of one policy, read. */
export interface Anchor {
  policy: CachedPolicy;
  name: string;
  info: CertificateInfo;
  /** Base64 DER: the certificate's identity. */
  id: string;
  /** Canonical PEM, as written. */
  pem: string;
}

/** What the policies install. */
export interface AnchorPlan {
  /** Entries by name; the winners are installed. */
  byName: Winners<Anchor>;
  /** The first (installed) entry of each certificate, by {@linkcode Anchor.id}. */
  byCertificate: Map<string, Anchor>;
  /** Items decided while planning (expired), per policy id. */
  settled: Map<string, ItemResult[]>;
}

/**
 * Parses and checks a cached policy with the shared rules, except the date (an expired certificate is reported on
 * its entry).
 *
 * @throws {PolicyContentError} naming the problems.
 */
export function certificatesContent(policy: CachedPolicy): CertificatesPolicy {
  const message = parsePolicyContent(policy, certificatesType);
  const issues = new IssueList();
  checkCertificates(message, issues, null);
  if (issues.issues.length) {
    throw new PolicyContentError(
      issues.issues.slice(0, 5).map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join("; "),
    );
  }
  return message;
}

/** Merges the entries of valid policies (in the engine's order); see the module documentation. */
export function planAnchors(
  valid: readonly { policy: CachedPolicy; message: CertificatesPolicy }[],
  now: Date,
): AnchorPlan {
  const plan: AnchorPlan = { byName: new Winners(), byCertificate: new Map(), settled: new Map() };
  for (const { policy, message } of valid) {
    const items: ItemResult[] = [];
    for (const entry of message.certificates) {
      const info = trustAnchor(entry.pem) as CertificateInfo; // checked by certificatesContent
      const expired = expiryProblem(info, now);
      if (expired) {
        items.push({
          schemaId: "certificates",
          key: entry.name,
          status: "NON_COMPLIANT",
          message: `${expired}; not installed`,
        });
        continue;
      }
      const id = derBase64(info.der);
      const anchor: Anchor = { policy, name: entry.name, info, id, pem: certificatePem(info.der) };
      if (plan.byCertificate.has(id)) {
        plan.byName.add(`\u0000${entry.name}\u0000${policy.id}`, anchor); // listed under its policy, installed once
        continue;
      }
      if (plan.byName.add(entry.name, anchor)) plan.byCertificate.set(id, anchor);
    }
    plan.settled.set(policy.id, items);
  }
  return plan;
}

/**
 * How `anchor` stands before any store is read: undefined when it is installed itself or as the same certificate
 * under another entry (then `as` is that entry), else the INAPPLICABLE reason.
 */
export function anchorStanding(plan: AnchorPlan, anchor: Anchor): { as: Anchor } | { overridden: string } {
  const first = plan.byCertificate.get(anchor.id);
  if (first) return { as: first };
  return {
    overridden: overriddenBy(
      plan.byName.winner(anchor.name)!.policy,
      `another certificate named ${anchor.name}`,
    ),
  };
}

/** The valid policies among `policies`, quietly (their own enforcer reports the others). */
function validPolicies(
  policies: readonly CachedPolicy[],
): { policy: CachedPolicy; message: CertificatesPolicy }[] {
  const out: { policy: CachedPolicy; message: CertificatesPolicy }[] = [];
  for (const policy of policies) {
    try {
      out.push({ policy, message: certificatesContent(policy) });
    } catch (err) {
      if (!(err instanceof PolicyContentError)) throw err;
    }
  }
  return out;
}

/** The installed anchors of each policy, as the browsers get them. */
function perPolicy(policies: readonly CachedPolicy[]): Map<CachedPolicy, Anchor[]> {
  const plan = planAnchors(validPolicies(policies), new Date());
  const out = new Map<CachedPolicy, Anchor[]>();
  for (const anchor of plan.byCertificate.values()) {
    out.set(anchor.policy, [...(out.get(anchor.policy) ?? []), anchor]);
  }
  return out;
}

/** The Certificates type's key for Firefox: `Certificates.Install` lists the anchor files of the system store. */
export const firefoxCertificates: BrowserCompanion = {
  type: certificatesType.wireName,
  async keyed(policies, io): Promise<KeyedValues[]> {
    const store = await detectTrustStore(io);
    if (!store) return [];
    return [...perPolicy(policies)].map(([policy, anchors]) => ({
      policy,
      values: { Certificates: { Install: anchors.map((a) => anchorPath(store, a.name)) } },
    }));
  },
};

/** The Certificates type's key for the Chromium family: `CACertificates`, base64 DER, added up across policies. */
export const chromiumCertificates: BrowserCompanion = {
  type: certificatesType.wireName,
  rules: { CACertificates: "union" },
  keyed(policies): Promise<KeyedValues[]> {
    return Promise.resolve(
      [...perPolicy(policies)].map(([policy, anchors]) => ({
        policy,
        values: { CACertificates: anchors.map((a) => a.id) },
      })),
    );
  },
};
