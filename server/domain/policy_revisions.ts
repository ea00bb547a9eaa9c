/**
 * Revisions of released policies: a change to a policy that nodes already enforce is prepared as a
 * pending revision (one per policy) while the released content keeps being delivered unchanged. Releasing
 * the revision validates it and replaces the policy's content and description in one transaction, bumps the
 * version and publishes one resync, so a node goes straight from the old settings to the new ones; discarding
 * it leaves the policy as it was. Duplicating copies any policy into a new draft.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { publishResync } from "../events/hub_notice.ts";
import type { CheckedContent } from "./bundle_codec.ts";
import { conflictError, found, notFoundError } from "../core/errors.ts";
import {
  assertReleasable,
  createPolicy,
  getPolicy,
  normalizeContent,
  type PolicyRecord,
  reachedGroups,
  updatePolicy,
} from "./policies.ts";
import { guardRelease } from "./lockout_guards.ts";
import { type ContentSigner, signScriptsOnRelease } from "./scripts_policy.ts";
import { getPolicyVersion, recordReleasedVersion } from "./policy_versions.ts";

/** The REST revision record. */
export interface PolicyRevision {
  policy_id: string;
  /** Released version the revision was started from. */
  base_version: number;
  description: string;
  /** protojson text, canonical for known types (validated on every save). */
  content: string;
  created_by: string;
  created_at: Date;
  updated_at: Date;
  /** The released version whose content this revision restores, until its content is edited. */
  restored_from: number | null;
}

const COLUMNS =
  "policy_id, base_version, description, content, created_by, created_at, updated_at, restored_from";

/** Reads the pending revision of a policy, if any. */
export async function findRevision(
  q: Queryable,
  policyId: string,
  options: { lock?: boolean } = {},
): Promise<PolicyRevision | undefined> {
  return await queryOne<PolicyRevision>(
    q,
    `SELECT ${COLUMNS} FROM policy_revisions WHERE policy_id = $1${options.lock ? " FOR UPDATE" : ""}`,
    [policyId],
  );
}

/** Reads the pending revision of a policy; throws not_found naming the policy when there is none. */
export async function getRevision(q: Queryable, policyId: string): Promise<PolicyRevision> {
  await getPolicy(q, policyId);
  return found(await findRevision(q, policyId), `pending revision of policy ${policyId}`);
}

/** Input of {@link saveRevision}; absent fields keep the revision's (or, when new, the policy's) value. */
export interface SaveRevisionInput {
  content?: string;
  description?: string;
  createdBy: string;
  /** `content` already checked off the event loop (see `normalizeContent` in policies.ts). */
  checked?: CheckedContent;
}

/**
 * Starts or edits the pending revision of a released policy. The content is validated for the policy's type
 * like a draft edit. Nothing is published: the released content is what nodes keep receiving.
 */
export async function saveRevision(
  q: Queryable,
  policyId: string,
  input: SaveRevisionInput,
): Promise<PolicyRevision> {
  const policy = await getPolicy(q, policyId, { lock: true });
  if (policy.state !== "released") {
    throw conflictError(
      `only a released policy is changed through a revision (current state: ${policy.state}); edit the ${policy.state} policy directly`,
    );
  }
  const current = await findRevision(q, policyId, { lock: true });
  const content = input.content !== undefined
    ? normalizeContent(policy.type, input.content, input.checked)
    : current?.content ?? policy.content;
  const description = input.description ?? current?.description ?? policy.description;
  if (current) {
    // Edited content no longer restores an old version as it was.
    const restoredFrom = current.content === content ? current.restored_from : null;
    await q.query(
      `UPDATE policy_revisions SET content = $2, description = $3, restored_from = $4, updated_at = now()
       WHERE policy_id = $1`,
      [policyId, content, description, restoredFrom],
    );
  } else {
    await q.query(
      `INSERT INTO policy_revisions (policy_id, base_version, description, content, created_by)
       VALUES ($1, $2, $3, $4, $5)`,
      [policyId, policy.version, description, content, input.createdBy],
    );
  }
  return found(await findRevision(q, policyId), `pending revision of policy ${policyId}`);
}

/** Drops the pending revision; the policy is left exactly as it was. Returns the policy. */
export async function discardRevision(q: Queryable, policyId: string): Promise<PolicyRecord> {
  const policy = await getPolicy(q, policyId, { lock: true });
  const rows = await q.query("DELETE FROM policy_revisions WHERE policy_id = $1 RETURNING policy_id", [
    policyId,
  ]);
  if (rows.length === 0) throw notFoundError(`pending revision of policy ${policyId}`);
  return policy;
}

/** Result of {@link releaseRevision}. */
export interface RevisionRelease {
  policy: PolicyRecord;
  fromVersion: number;
  /** The reason given to release a revision despite its type's lockout guard. */
  lockoutOverride?: string;
  /** The released version a rollback revision restored. */
  restoredFrom: number | null;
}

/**
 * Releases the pending revision: validates its content, replaces the policy's content and description,
 * bumps the version, removes the revision and publishes one resync for the groups the policy reaches, all in
 * the caller's transaction. Refused when the policy is no longer released or its version moved on since the
 * revision was started. `checked` is the revision's content checked off the event loop already (large
 * content; see `precheckContent` in server/domain/content_offloop.ts), which is then not checked again here.
 */
export async function releaseRevision(
  q: Queryable,
  policyId: string,
  options: { lockoutReason?: string; checked?: CheckedContent; signer?: ContentSigner; by?: string } = {},
): Promise<RevisionRelease> {
  const policy = await getPolicy(q, policyId, { lock: true });
  const revision = found(
    await findRevision(q, policyId, { lock: true }),
    `pending revision of policy ${policyId}`,
  );
  if (policy.state !== "released") {
    throw conflictError(
      `the revision cannot be released: the policy is ${policy.state} now; discard the revision and edit the policy directly`,
    );
  }
  if (revision.base_version !== policy.version) {
    throw conflictError(
      `the revision was started from version ${revision.base_version} but the policy is at version ${policy.version} now; discard the revision and start again`,
    );
  }
  assertReleasable(policy.type, revision.content, { checked: options.checked, what: "revision" });
  await q.query(
    `UPDATE policies SET content = $2, description = $3, version = version + 1, updated_at = now()
     WHERE id = $1`,
    [policyId, revision.content, revision.description],
  );
  // The guard reads the stored content, which is the revision's from here on in this transaction; a refusal
  // rolls the whole release back.
  const lockoutOverride = await guardRelease(q, {
    type: policy.type,
    policyId,
    reason: options.lockoutReason,
  });
  await signScriptsOnRelease(
    q,
    { id: policyId, type: policy.type, version: policy.version + 1, content: revision.content },
    options.signer,
  );
  await q.query("DELETE FROM policy_revisions WHERE policy_id = $1", [policyId]);
  await recordReleasedVersion(q, policyId, {
    releasedBy: options.by ?? "",
    origin: revision.restored_from ? "rollback" : "revision",
    restoredFrom: revision.restored_from,
  });
  await publishResync(q, await reachedGroups(q, policyId));
  return {
    policy: await getPolicy(q, policyId),
    fromVersion: policy.version,
    lockoutOverride,
    restoredFrom: revision.restored_from,
  };
}

/** What {@link restoreVersion} did. */
export interface VersionRestore {
  /** The policy after the restore (a draft at its next version, or unchanged while a revision waits). */
  policy: PolicyRecord;
  /** The revision started from the old version (a released policy); undefined for a draft. */
  revision?: PolicyRevision;
  /** The version the policy was at when the restore was asked for. */
  fromVersion: number;
}

/**
 * Rollback to an earlier released version without rewriting history. On a released policy it starts a
 * revision from that version's content and description (refused while another revision is pending, so no
 * work in progress is lost); nodes keep the current version until the revision is released like any other,
 * which then records a new version that names the restored one. On a draft it edits the draft to that
 * content (the draft's version moves on, as with every edit). Archived policies are refused.
 */
export async function restoreVersion(
  q: Queryable,
  policyId: string,
  version: number,
  options: { by: string },
): Promise<VersionRestore> {
  const policy = await getPolicy(q, policyId, { lock: true });
  const old = await getPolicyVersion(q, policyId, version);
  if (policy.state === "archived") {
    throw conflictError(
      `policy "${policy.name}" is archived; move it to draft first, then restore version ${version}`,
    );
  }
  if (policy.state === "draft") {
    const updated = await updatePolicy(q, policyId, { content: old.content, description: old.description });
    return { policy: updated, fromVersion: policy.version };
  }
  const pending = await findRevision(q, policyId, { lock: true });
  if (pending) {
    throw conflictError(
      `a revision of "${policy.name}" is pending (started by ${pending.created_by || "someone"}); ` +
        `release or discard it first, then restore version ${version}`,
    );
  }
  if (version === policy.version) {
    throw conflictError(`version ${version} is the released version of "${policy.name}" already`);
  }
  await q.query(
    `INSERT INTO policy_revisions (policy_id, base_version, description, content, created_by, restored_from)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [policyId, policy.version, old.description, old.content, options.by, version],
  );
  const revision = found(await findRevision(q, policyId), `pending revision of policy ${policyId}`);
  return { policy: await getPolicy(q, policyId), revision, fromVersion: policy.version };
}

/**
 * Creates a new draft policy with the released (or draft) content, type and description of `sourceId`.
 * The name defaults to "<name> (copy)", numbered while taken.
 */
export async function duplicatePolicy(
  q: Queryable,
  sourceId: string,
  input: { name?: string; createdBy: string },
): Promise<PolicyRecord> {
  const source = await getPolicy(q, sourceId);
  const name = input.name ?? await freeCopyName(q, source.name);
  return await createPolicy(q, {
    name,
    description: source.description,
    type: source.type,
    content: source.content,
    createdBy: input.createdBy,
  });
}

async function freeCopyName(q: Queryable, name: string): Promise<string> {
  const base = `${name.slice(0, 190)} (copy)`;
  for (let n = 1; n < 1000; n++) {
    const candidate = n === 1 ? base : `${name.slice(0, 185)} (copy ${n})`;
    if (!await queryOne(q, "SELECT 1 FROM policies WHERE name = $1", [candidate])) return candidate;
  }
  throw conflictError(`too many copies of policy "${name}"; give the copy a name`);
}
