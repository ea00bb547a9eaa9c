/**
 * The version history of a policy: every released version with its name, description and content as nodes
 * received it, who released it and when (table `policy_versions`, migration 0021). A row is written by
 * {@link recordReleasedVersion} in the transaction that releases a draft or a revision and never changed
 * afterwards. Restoring an old version does not rewrite anything: it starts a revision from the old content
 * (policy_revisions.ts), and releasing that revision adds a new version whose row names the one it restored.
 *
 * Plain SQL over the policies tables; it imports no other domain module, so policies.ts and
 * policy_revisions.ts can both record versions through it.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { found, notFoundError } from "../core/errors.ts";

/** How a version came to be released. */
export type VersionOrigin = "release" | "revision" | "rollback";

/** A released version without its content (the history list). */
export interface PolicyVersionSummary {
  policy_id: string;
  version: number;
  name: string;
  description: string;
  /** Username of whoever released it; "" for versions released before history was kept. */
  released_by: string;
  released_at: Date;
  origin: VersionOrigin;
  /** For a rollback: the version whose content it restored. */
  restored_from: number | null;
}

/** A released version with its content (protojson text, as delivered). */
export interface PolicyVersion extends PolicyVersionSummary {
  content: string;
}

const SUMMARY_COLUMNS =
  "policy_id, version, name, description, released_by, released_at, origin, restored_from";

/**
 * Records the policy's current name, description, content and version as released by `releasedBy`, inside
 * the caller's transaction (call it after the release is written). A version already recorded is left as it
 * was: its content cannot have changed, since every edit bumps the version.
 */
export async function recordReleasedVersion(
  q: Queryable,
  policyId: string,
  options: { releasedBy: string; origin: VersionOrigin; restoredFrom?: number | null },
): Promise<void> {
  await q.query(
    `INSERT INTO policy_versions (policy_id, version, name, description, content, released_by, origin,
       restored_from)
     SELECT id, version, name, description, content, $2, $3, $4 FROM policies WHERE id = $1
     ON CONFLICT (policy_id, version) DO NOTHING`,
    [policyId, options.releasedBy, options.origin, options.restoredFrom ?? null],
  );
}

async function assertPolicyExists(q: Queryable, policyId: string): Promise<void> {
  if (!await queryOne(q, "SELECT 1 FROM policies WHERE id = $1", [policyId])) {
    throw notFoundError(`policy ${policyId}`);
  }
}

/** Every released version of a policy, newest first; not_found when the policy does not exist. */
export async function listPolicyVersions(q: Queryable, policyId: string): Promise<PolicyVersionSummary[]> {
  await assertPolicyExists(q, policyId);
  return await q.query<PolicyVersionSummary>(
    `SELECT ${SUMMARY_COLUMNS} FROM policy_versions WHERE policy_id = $1 ORDER BY version DESC`,
    [policyId],
  );
}

/** One released version with its content; not_found naming the policy and version otherwise. */
export async function getPolicyVersion(
  q: Queryable,
  policyId: string,
  version: number,
): Promise<PolicyVersion> {
  await assertPolicyExists(q, policyId);
  return found(
    await queryOne<PolicyVersion>(
      q,
      `SELECT ${SUMMARY_COLUMNS}, content FROM policy_versions WHERE policy_id = $1 AND version = $2`,
      [policyId, version],
    ),
    `released version ${version} of policy ${policyId}`,
  );
}
