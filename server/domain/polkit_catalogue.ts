/**
 * The merged polkit action catalogue the Polkit editor picks from: the actions agents reported (stored per node
 * by `server/grpc/catalogues.ts`) over the built-in catalogue shipped with the server
 * (`server/catalogues/polkit_builtin.json`, generated at dev time by `packaging/gen_polkit_catalogue.ts` from a
 * Debian machine's `/usr/share/polkit-1/actions`), so the editor works before any agent reports. An action an
 * agent reported is described by the agent's copy; each action says on how many nodes it exists and what
 * polkit answers by default (implicit authorizations for any, inactive and active sessions).
 */
import type { Queryable } from "../db/db.ts";
import builtin from "../catalogues/polkit_builtin.json" with { type: "json" };

/** One action as the REST API shows it. */
export interface PolkitActionRecord {
  action_id: string;
  description: string;
  message: string;
  vendor: string;
  default_any: string;
  default_inactive: string;
  default_active: string;
  /** Nodes whose last report lists the action. */
  node_count: number;
  /** Shipped with the server. */
  builtin: boolean;
}

/** A dotted prefix shared by matching actions (for `action_prefixes`), e.g. `org.freedesktop.login1.`. */
export interface PolkitPrefix {
  prefix: string;
  action_count: number;
}

/** Where the built-in catalogue came from. */
export const POLKIT_BUILTIN_SOURCE: string = builtin.source;

const BUILTIN: ReadonlyMap<string, PolkitActionRecord> = new Map(
  builtin.actions.map((a) => [a.actionId, {
    action_id: a.actionId,
    description: a.description,
    message: a.message,
    vendor: a.vendor,
    default_any: a.defaultAny,
    default_inactive: a.defaultInactive,
    default_active: a.defaultActive,
    node_count: 0,
    builtin: true,
  }]),
);

async function merged(q: Queryable): Promise<PolkitActionRecord[]> {
  const rows = await q.query<Omit<PolkitActionRecord, "builtin">>(
    `SELECT a.action_id, a.description, a.message, a.vendor, a.default_any, a.default_inactive, a.default_active,
       (SELECT count(*)::int FROM node_polkit_actions n WHERE n.action_id = a.action_id) AS node_count
     FROM polkit_actions a`,
  );
  const out = new Map(BUILTIN);
  for (const row of rows) out.set(row.action_id, { ...row, builtin: BUILTIN.has(row.action_id) });
  return [...out.values()];
}

/** Every proper dotted prefix of an id, with the trailing dot: `a.b.c` → `a.`, `a.b.`. */
function prefixesOf(id: string): string[] {
  const parts = id.split(".");
  return parts.slice(1).map((_, i) => `${parts.slice(0, i + 1).join(".")}.`);
}

/**
 * Searches the merged catalogue by action id, description and vendor (case-insensitive substring; empty finds
 * everything), actions present on more nodes first, then by id; also the dotted prefixes the matches share
 * (at least two actions, the most specific first), for rules that name a prefix.
 */
export async function searchPolkitActions(
  q: Queryable,
  options: { query?: string; limit?: number } = {},
): Promise<
  { total: number; nodes_reporting: number; items: PolkitActionRecord[]; prefixes: PolkitPrefix[] }
> {
  const needle = (options.query ?? "").trim().toLowerCase();
  const hits = (await merged(q)).filter((a) =>
    needle === "" || a.action_id.toLowerCase().includes(needle) ||
    a.description.toLowerCase().includes(needle) || a.vendor.toLowerCase().includes(needle)
  );
  hits.sort((a, b) => b.node_count - a.node_count || (a.action_id < b.action_id ? -1 : 1));
  const counts = new Map<string, number>();
  for (const a of hits) for (const p of prefixesOf(a.action_id)) counts.set(p, (counts.get(p) ?? 0) + 1);
  const prefixes = [...counts].filter(([p, n]) => n >= 2 && p.split(".").length > 2)
    .sort((a, b) => b[0].split(".").length - a[0].split(".").length || b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, 20)
    .map(([prefix, action_count]) => ({ prefix, action_count }));
  const reporting = await q.query<{ n: number }>(
    "SELECT count(DISTINCT node_id)::int AS n FROM node_polkit_actions",
  );
  return {
    total: hits.length,
    nodes_reporting: reporting[0]?.n ?? 0,
    items: hits.slice(0, options.limit ?? 50),
    prefixes,
  };
}
