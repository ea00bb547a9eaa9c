/**
 * Policies: the authored artifacts. A policy is created as a draft (version 1), edited only while draft
 * (each edit bumps the version), released after its content validates, archived, or moved back to draft
 * while no enabled binding delivers it. Every change that can alter what a node receives publishes a resync
 * for the node groups the policy reaches, inside the caller's transaction.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { publishResync } from "../events/hub_notice.ts";
import { validatePolicyContent } from "../../shared/policy_types/mod.ts";
import { checkContent, type CheckedContent } from "./bundle_codec.ts";
import { conflictError, fieldsError, found, invalidError } from "../core/errors.ts";
import { likePattern, type ListOptions, orderBy, type Page, Params, selectPage } from "../db/pagination.ts";
import { assertNameFree, lockRow } from "./records.ts";
import { guardRelease } from "./lockout_guards.ts";
import { type ContentSigner, signScriptsOnRelease } from "./scripts_policy.ts";
import { recordReleasedVersion } from "./policy_versions.ts";

/** Lifecycle states of a policy. */
export const POLICY_STATES = ["draft", "released", "archived"] as const;
/** A policy state. */
export type PolicyState = (typeof POLICY_STATES)[number];

/** Allowed transitions (spec: States and transitions, policy artifact state). */
const TRANSITIONS: Record<PolicyState, readonly PolicyState[]> = {
  draft: ["released"],
  released: ["archived", "draft"],
  archived: ["draft"],
};

/** The REST policy record. */
export interface PolicyRecord {
  id: string;
  name: string;
  description: string;
  /** Wire name, e.g. `Firefox`. */
  type: string;
  /** protojson text of the type's content message (canonical form for known types). */
  content: string;
  version: number;
  state: PolicyState;
  deprecated: boolean;
  deprecated_at: Date | null;
  deprecation_message: string;
  replacement_policy_id: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
  bindings_count: number;
  enabled_bindings_count: number;
  /** A revision of this released policy is being prepared (see policy_revisions.ts). */
  revision_pending: boolean;
}

/** A policy without its content (list rows stay small). */
export type PolicySummary = Omit<PolicyRecord, "content">;

const SUMMARY_COLUMNS =
  `p.id, p.name, p.description, p.type, p.version, p.state, p.deprecated, p.deprecated_at,
  p.deprecation_message, p.replacement_policy_id, p.created_by, p.created_at, p.updated_at,
  (SELECT count(*)::int FROM policy_bindings b WHERE b.policy_id = p.id) AS bindings_count,
  (SELECT count(*)::int FROM policy_bindings b WHERE b.policy_id = p.id AND b.state = 'enabled')
    AS enabled_bindings_count,
  EXISTS (SELECT 1 FROM policy_revisions r WHERE r.policy_id = p.id) AS revision_pending`;

/** Public sort names → SQL. */
export const POLICY_SORT_COLUMNS: Record<string, string> = {
  name: "p.name",
  type: "p.type",
  state: "p.state",
  version: "p.version",
  created_at: "p.created_at",
  updated_at: "p.updated_at",
};

/** Filters of the policy list. */
export interface PolicyFilter {
  state?: PolicyState;
  type?: string;
  /** Case-insensitive substring of the name. */
  name?: string;
  deprecated?: boolean;
}

/** Lists policies (without content), filtered, sorted and paginated. */
export async function listPolicies(
  q: Queryable,
  filter: PolicyFilter,
  options: ListOptions,
): Promise<Page<PolicySummary>> {
  const params = new Params();
  const where: string[] = [];
  if (filter.state) where.push(`p.state = ${params.add(filter.state)}`);
  if (filter.type) where.push(`p.type = ${params.add(filter.type)}`);
  if (filter.name) where.push(`p.name ILIKE ${params.add(likePattern(filter.name))} ESCAPE '\\'`);
  if (filter.deprecated !== undefined) where.push(`p.deprecated = ${params.add(filter.deprecated)}`);
  return await selectPage<PolicySummary>(q, {
    columns: SUMMARY_COLUMNS,
    from: "policies p",
    where,
    params: params.values,
    orderBy: orderBy(options.sort ?? {}, {
      columns: POLICY_SORT_COLUMNS,
      fallback: "updated_at",
      tiebreak: "p.name, p.id",
      defaultOrder: options.sort?.field ? "asc" : "desc",
    }),
    page: options.page,
  });
}

/** Reads one policy; throws not_found. `lock` takes a row lock for the rest of the transaction. */
export async function getPolicy(
  q: Queryable,
  id: string,
  options: { lock?: boolean } = {},
): Promise<PolicyRecord> {
  return await readPolicy<PolicyRecord>(q, id, `${SUMMARY_COLUMNS}, p.content`, options);
}

/**
 * Reads one policy without its content; throws not_found. For what needs its name, type or state, or holds
 * the content already: a 1 MiB content read back costs the loop its decoding for nothing.
 */
export async function getPolicySummary(
  q: Queryable,
  id: string,
  options: { lock?: boolean } = {},
): Promise<PolicySummary> {
  return await readPolicy<PolicySummary>(q, id, SUMMARY_COLUMNS, options);
}

async function readPolicy<T>(
  q: Queryable,
  id: string,
  columns: string,
  options: { lock?: boolean },
): Promise<T> {
  if (options.lock) await lockRow(q, { table: "policies", id, what: `policy ${id}` });
  const row = await queryOne<T>(q, `SELECT ${columns} FROM policies p WHERE p.id = $1`, [id]);
  return found(row, `policy ${id}`);
}

/** Finds a policy by its exact name. */
export async function findPolicyByName(q: Queryable, name: string): Promise<PolicyRecord | undefined> {
  return await queryOne<PolicyRecord>(
    q,
    `SELECT ${SUMMARY_COLUMNS}, p.content FROM policies p WHERE p.name = $1`,
    [name],
  );
}

/**
 * Validates content for `type` (spec rules 1–5) and returns the text to store: the canonical protojson for a
 * known type, the trimmed text for an unknown one. Throws `invalid` naming the field (`content.…`). `checked`
 * is the result of checking this very content already (`checkContentOffLoop`, server/domain/content_offloop.ts, which checks
 * large content in a worker): when it matches type and text it is used as is, so the check never runs twice.
 */
export function normalizeContent(type: string, content: string, checked?: CheckedContent): string {
  if (checked && checked.type === type && checked.content === content) return checked.canonical;
  return checkContent(type, content).canonical;
}

/**
 * Refuses content that does not validate for `type` ("<what> cannot be released: …", fields named
 * `content.…`). `checked` is this content checked off the event loop already (large content, see
 * `precheckContent` in server/domain/content_offloop.ts): when it matches type and text, the check does not run again.
 */
export function assertReleasable(
  type: string,
  content: string,
  options: { checked?: CheckedContent; what: string },
): void {
  const { checked } = options;
  if (checked?.type === type && checked.content === content) return;
  const issues = validatePolicyContent(type, content);
  if (issues.length > 0) {
    const err = fieldsError(issues, "content");
    throw invalidError(`${options.what} cannot be released: ${err.message}`, err.fields);
  }
}

/** Input of {@link createPolicy}. */
export interface CreatePolicyInput {
  name: string;
  description?: string;
  type: string;
  content: string;
  createdBy: string;
  /** `content` already checked off the event loop (see {@link normalizeContent}). */
  checked?: CheckedContent;
}

/** Creates a draft policy at version 1 after validating its content. Publishes nothing (drafts reach no node). */
export async function createPolicy(q: Queryable, input: CreatePolicyInput): Promise<PolicyRecord> {
  const content = normalizeContent(input.type, input.content, input.checked);
  await assertNameFree(q, { table: "policies", noun: "policy", name: input.name });
  const [row] = await q.query<{ id: string }>(
    `INSERT INTO policies (name, description, type, content, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [input.name, input.description ?? "", input.type, content, input.createdBy],
  );
  return { ...(await getPolicySummary(q, row.id)), content };
}

/** Input of {@link updatePolicy}; absent fields keep their value. */
export interface UpdatePolicyInput {
  name?: string;
  description?: string;
  type?: string;
  content?: string;
  /** When given, the update is refused unless the stored version still equals it (lost-update guard). */
  expectedVersion?: number;
  /** `content` already checked off the event loop (see {@link normalizeContent}). */
  checked?: CheckedContent;
}

/**
 * Edits a draft policy and bumps its version. Released and archived policies are refused (move to draft
 * first). Publishes a resync to the groups the policy reaches (none while it is a draft, so in practice
 * nothing: the call is kept so that the rule "an update reaches whoever receives the policy" lives here).
 */
export async function updatePolicy(
  q: Queryable,
  id: string,
  input: UpdatePolicyInput,
): Promise<PolicyRecord> {
  // The stored content is read only when it is kept or re-checked for a new type.
  const keepsContent = input.content === undefined;
  const current: PolicySummary & { content?: string } = keepsContent
    ? await getPolicy(q, id, { lock: true })
    : await getPolicySummary(q, id, { lock: true });
  if (current.state !== "draft") {
    throw conflictError(
      `policy can only be edited in draft state (current state: ${current.state}); move it to draft first`,
    );
  }
  if (input.expectedVersion !== undefined && input.expectedVersion !== current.version) {
    throw conflictError(
      `policy was changed meanwhile (expected version ${input.expectedVersion}, current version ${current.version}); reload it and apply your edit again`,
    );
  }
  const type = input.type ?? current.type;
  const stored = current.content ?? "";
  const content = input.content !== undefined || input.type !== undefined
    ? normalizeContent(type, input.content ?? stored, input.checked)
    : stored;
  if (input.name !== undefined) {
    await assertNameFree(q, { table: "policies", noun: "policy", name: input.name, exceptId: id });
  }
  await q.query(
    `UPDATE policies SET name = $2, description = $3, type = $4, content = $5, version = version + 1,
       updated_at = now() WHERE id = $1`,
    [id, input.name ?? current.name, input.description ?? current.description, type, content],
  );
  await publishResync(q, await reachedGroups(q, id));
  return { ...(await getPolicySummary(q, id)), content };
}

/** Result of a state change. */
export interface StateChange {
  policy: PolicyRecord;
  from: PolicyState;
  /** The reason given to release a policy despite its type's lockout guard. */
  lockoutOverride?: string;
}

/**
 * Moves a policy along the transitions table. Release validates the content for the type; moving to draft is
 * refused while enabled bindings exist; anything else not in the table is refused naming the current state.
 * Publishes a resync to the groups reached through enabled bindings.
 */
export async function changePolicyState(
  q: Queryable,
  id: string,
  target: PolicyState,
  options: { lockoutReason?: string; checked?: CheckedContent; signer?: ContentSigner; by?: string } = {},
): Promise<StateChange> {
  const current = await getPolicy(q, id, { lock: true });
  const from = current.state;
  if (from === target) throw conflictError(`policy is already ${target}`);
  if (!TRANSITIONS[from].includes(target)) {
    const allowed = TRANSITIONS[from].join(" or ");
    throw conflictError(
      `cannot move a policy from ${from} to ${target} (current state: ${from}; allowed next: ${allowed})`,
    );
  }
  if (target === "released") {
    assertReleasable(current.type, current.content, { checked: options.checked, what: "policy" });
  }
  let lockoutOverride: string | undefined;
  if (target === "released") {
    lockoutOverride = await guardRelease(q, {
      type: current.type,
      policyId: id,
      reason: options.lockoutReason,
    });
    await signScriptsOnRelease(q, current, options.signer);
  }
  if (target === "draft" && current.enabled_bindings_count > 0) {
    throw conflictError(
      `cannot move policy to draft: ${current.enabled_bindings_count} enabled binding(s) exist; disable them first`,
    );
  }
  await q.query("UPDATE policies SET state = $2, updated_at = now() WHERE id = $1", [id, target]);
  if (target === "released") {
    await recordReleasedVersion(q, id, { releasedBy: options.by ?? "", origin: "release" });
  }
  await publishResync(q, await reachedGroups(q, id));
  return { policy: await getPolicy(q, id), from, lockoutOverride };
}

/** Input of {@link deprecatePolicy}. */
export interface DeprecateInput {
  /** False lifts a deprecation. */
  deprecated: boolean;
  message?: string;
  replacementPolicyId?: string | null;
}

/**
 * Marks a policy deprecated (flag, message, optional replacement that must exist and not be the policy
 * itself), or lifts the mark. Publishes a resync to the groups reached (agents show the deprecation).
 */
export async function deprecatePolicy(
  q: Queryable,
  id: string,
  input: DeprecateInput,
): Promise<PolicyRecord> {
  await getPolicy(q, id, { lock: true });
  const replacement = input.deprecated ? input.replacementPolicyId ?? null : null;
  if (replacement !== null) {
    if (replacement === id) {
      throw invalidError("replacement_policy_id: a policy cannot replace itself; choose another policy", [
        { field: "replacement_policy_id", message: "a policy cannot replace itself; choose another policy" },
      ]);
    }
    const exists = await queryOne(q, "SELECT 1 FROM policies WHERE id = $1", [replacement]);
    if (!exists) {
      throw invalidError(`replacement_policy_id: policy ${replacement} does not exist`, [
        { field: "replacement_policy_id", message: `policy ${replacement} does not exist` },
      ]);
    }
  }
  await q.query(
    `UPDATE policies SET deprecated = $2, deprecated_at = CASE WHEN $2 THEN coalesce(deprecated_at, now()) END,
       deprecation_message = $3, replacement_policy_id = $4, updated_at = now() WHERE id = $1`,
    [id, input.deprecated, input.deprecated ? input.message ?? "" : "", replacement],
  );
  await publishResync(q, await reachedGroups(q, id));
  return await getPolicy(q, id);
}

/** Deletes a policy and its (disabled) bindings; refused while enabled bindings exist. */
export async function deletePolicy(q: Queryable, id: string): Promise<PolicyRecord> {
  const current = await getPolicy(q, id, { lock: true });
  if (current.enabled_bindings_count > 0) {
    throw conflictError(
      `cannot delete policy: ${current.enabled_bindings_count} enabled binding(s) exist; disable them first`,
    );
  }
  await q.query("DELETE FROM policies WHERE id = $1", [id]);
  return current;
}

/** Node groups that an enabled binding links to the policy (whom a change of it may concern). */
export async function reachedGroups(q: Queryable, policyId: string): Promise<string[]> {
  const rows = await q.query<{ node_group_id: string }>(
    "SELECT node_group_id FROM policy_bindings WHERE policy_id = $1 AND state = 'enabled' ORDER BY node_group_id",
    [policyId],
  );
  return rows.map((r) => r.node_group_id);
}
