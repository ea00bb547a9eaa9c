/**
 * Policy bindings link a policy to a node group with a priority. A binding starts disabled; enabling needs a
 * released policy. Enabling, disabling, a priority change of an enabled binding and the deletion of an
 * enabled binding publish a resync for the binding's node group inside the caller's transaction.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { publishResync } from "../events/hub_notice.ts";
import { conflictError, found, invalidError } from "../core/errors.ts";
import { type ListOptions, orderBy, type Page, Params, selectPage } from "../db/pagination.ts";
import { lockRow } from "./records.ts";
import { guardBindingEnable } from "./lockout_guards.ts";
import { memberCountSql } from "./node_groups.ts";

/** Binding states. */
export const BINDING_STATES = ["enabled", "disabled"] as const;
/** A binding state. */
export type BindingState = (typeof BINDING_STATES)[number];

/** Priority bounds (also a database check). Higher wins. */
export const MIN_PRIORITY = -1_000_000;
/** Largest priority. */
export const MAX_PRIORITY = 1_000_000;

/** The REST binding record, with the names a list shows. */
export interface BindingRecord {
  id: string;
  policy_id: string;
  policy_name: string;
  policy_type: string;
  policy_state: string;
  node_group_id: string;
  node_group_name: string;
  state: BindingState;
  priority: number;
  /** Members of the node group. */
  node_count: number;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `b.id, b.policy_id, p.name AS policy_name, p.type AS policy_type, p.state AS policy_state,
  b.node_group_id, g.name AS node_group_name, b.state, b.priority,
  ${memberCountSql("b.node_group_id")} AS node_count,
  b.created_at, b.updated_at`;
const FROM =
  "policy_bindings b JOIN policies p ON p.id = b.policy_id JOIN node_groups g ON g.id = b.node_group_id";

/** Public sort names → SQL. */
export const BINDING_SORT_COLUMNS: Record<string, string> = {
  priority: "b.priority",
  policy_name: "p.name",
  node_group_name: "g.name",
  state: "b.state",
  created_at: "b.created_at",
  updated_at: "b.updated_at",
};

/** Filters of the binding list. */
export interface BindingFilter {
  policyId?: string;
  nodeGroupId?: string;
  state?: BindingState;
}

/** Lists bindings, by default highest priority first. */
export async function listBindings(
  q: Queryable,
  filter: BindingFilter,
  options: ListOptions,
): Promise<Page<BindingRecord>> {
  const params = new Params();
  const where: string[] = [];
  if (filter.policyId) where.push(`b.policy_id = ${params.add(filter.policyId)}`);
  if (filter.nodeGroupId) where.push(`b.node_group_id = ${params.add(filter.nodeGroupId)}`);
  if (filter.state) where.push(`b.state = ${params.add(filter.state)}`);
  return await selectPage<BindingRecord>(q, {
    columns: COLUMNS,
    from: FROM,
    where,
    params: params.values,
    orderBy: orderBy(options.sort ?? {}, {
      columns: BINDING_SORT_COLUMNS,
      fallback: "priority",
      tiebreak: "p.name, g.name, b.id",
      defaultOrder: options.sort?.field ? "asc" : "desc",
      nullable: [],
    }),
    page: options.page,
    // Members are counted for the page's bindings only, not for every binding an offset skips.
    pageKey: "b.id",
  });
}

/** Reads one binding; throws not_found. `lock` locks the binding row for the transaction. */
export async function getBinding(
  q: Queryable,
  id: string,
  options: { lock?: boolean } = {},
): Promise<BindingRecord> {
  if (options.lock) await lockRow(q, { table: "policy_bindings", id, what: `binding ${id}` });
  const row = await queryOne<BindingRecord>(q, `SELECT ${COLUMNS} FROM ${FROM} WHERE b.id = $1`, [id]);
  return found(row, `binding ${id}`);
}

/** Input of {@link createBinding}. */
export interface CreateBindingInput {
  policyId: string;
  nodeGroupId: string;
  priority?: number;
}

/** Creates a disabled binding; one per policy and node group. Publishes nothing (disabled reaches no node). */
export async function createBinding(q: Queryable, input: CreateBindingInput): Promise<BindingRecord> {
  const policy = await queryOne(q, "SELECT 1 FROM policies WHERE id = $1", [input.policyId]);
  if (!policy) {
    throw invalidError(`policy_id: policy ${input.policyId} does not exist`, [
      { field: "policy_id", message: `policy ${input.policyId} does not exist` },
    ]);
  }
  const group = await queryOne(q, "SELECT 1 FROM node_groups WHERE id = $1", [input.nodeGroupId]);
  if (!group) {
    throw invalidError(`node_group_id: node group ${input.nodeGroupId} does not exist`, [
      { field: "node_group_id", message: `node group ${input.nodeGroupId} does not exist` },
    ]);
  }
  const existing = await queryOne<{ id: string }>(
    q,
    "SELECT id FROM policy_bindings WHERE policy_id = $1 AND node_group_id = $2",
    [input.policyId, input.nodeGroupId],
  );
  if (existing) {
    throw conflictError(
      `the policy is already bound to this node group (binding ${existing.id}); change that binding instead`,
    );
  }
  const [row] = await q.query<{ id: string }>(
    `INSERT INTO policy_bindings (policy_id, node_group_id, state, priority) VALUES ($1, $2, 'disabled', $3)
     RETURNING id`,
    [input.policyId, input.nodeGroupId, input.priority ?? 0],
  );
  return await getBinding(q, row.id);
}

/** Input of {@link updateBinding}; absent fields keep their value. */
export interface UpdateBindingInput {
  state?: BindingState;
  priority?: number;
  /** Reason to enable a binding despite its type's lockout guard (SessionAccess, Privilege; audited by the route). */
  lockoutReason?: string;
  /** Set by the guard when the reason was used. */
  onLockoutOverride?: (reason: string) => void;
}

/**
 * Enables/disables a binding or changes its priority. Enabling requires the policy to be released (its row is
 * locked so a concurrent move to draft cannot slip in between). Publishes a resync for the binding's group
 * when the state changes, or when the priority of an enabled binding changes.
 */
export async function updateBinding(
  q: Queryable,
  id: string,
  input: UpdateBindingInput,
): Promise<BindingRecord> {
  const pre = found(
    await queryOne<{ policy_id: string }>(q, "SELECT policy_id FROM policy_bindings WHERE id = $1", [id]),
    `binding ${id}`,
  );
  // Lock order policy → binding, the same as policy state changes, so the two cannot deadlock. NO KEY UPDATE
  // orders it against state changes without holding off reports on the policy (they take KEY SHARE).
  await q.query("SELECT 1 FROM policies WHERE id = $1 FOR NO KEY UPDATE", [pre.policy_id]);
  const current = await getBinding(q, id, { lock: true });
  const state = input.state ?? current.state;
  const priority = input.priority ?? current.priority;
  if (state === "enabled" && current.state !== "enabled" && current.policy_state !== "released") {
    throw conflictError(
      `binding can only be enabled when its policy is released (current policy state: ${current.policy_state}); release the policy first`,
    );
  }
  if (state === "enabled" && current.state !== "enabled") {
    const overriddenWith = await guardBindingEnable(q, {
      type: current.policy_type,
      policyId: current.policy_id,
      nodeGroupId: current.node_group_id,
      nodeGroupName: current.node_group_name,
      reason: input.lockoutReason,
    });
    if (overriddenWith) input.onLockoutOverride?.(overriddenWith);
  }
  const stateChanged = state !== current.state;
  const priorityChanged = priority !== current.priority;
  if (!stateChanged && !priorityChanged) return current;
  await q.query(
    "UPDATE policy_bindings SET state = $2, priority = $3, updated_at = now() WHERE id = $1",
    [id, state, priority],
  );
  if (stateChanged || (priorityChanged && state === "enabled")) {
    await publishResync(q, [current.node_group_id]);
  }
  return await getBinding(q, id);
}

/** Deletes a binding; deleting an enabled one publishes a resync for its group. */
export async function deleteBinding(q: Queryable, id: string): Promise<BindingRecord> {
  const current = await getBinding(q, id, { lock: true });
  await q.query("DELETE FROM policy_bindings WHERE id = $1", [id]);
  if (current.state === "enabled") await publishResync(q, [current.node_group_id]);
  return current;
}
