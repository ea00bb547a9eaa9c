/**
 * Client routes (spec: Web port routing 2). The server answers every non-API path with the index document;
 * this table decides what to show, and anything it does not know is replaced by `/`. Pure, so it is tested
 * outside a browser.
 */

/** Names of the client routes. */
export type RouteName =
  | "dashboard"
  | "policies"
  | "policy-new"
  | "policy-edit"
  | "nodes"
  | "node-groups"
  | "policy-bindings"
  | "compliance"
  | "disk-encryption"
  | "audit-logs"
  | "settings";

/** A matched route. */
export interface RouteMatch {
  name: RouteName;
  params: Record<string, string>;
  /** The query of the URL (filters, pages, tabs). */
  query: URLSearchParams;
}

const ROUTES: ReadonlyArray<{ name: RouteName; pattern: RegExp; keys: string[] }> = [
  { name: "dashboard", pattern: /^\/$/, keys: [] },
  { name: "policies", pattern: /^\/policies$/, keys: [] },
  { name: "policy-new", pattern: /^\/policies\/new$/, keys: [] },
  { name: "policy-edit", pattern: /^\/policies\/([^/]+)\/edit$/, keys: ["policyId"] },
  { name: "nodes", pattern: /^\/nodes$/, keys: [] },
  { name: "node-groups", pattern: /^\/node-groups$/, keys: [] },
  { name: "policy-bindings", pattern: /^\/policy-bindings$/, keys: [] },
  { name: "compliance", pattern: /^\/compliance$/, keys: [] },
  { name: "disk-encryption", pattern: /^\/disk-encryption$/, keys: [] },
  { name: "audit-logs", pattern: /^\/audit-logs$/, keys: [] },
  { name: "settings", pattern: /^\/settings$/, keys: [] },
];

/** Matches a path (a trailing slash is ignored); undefined for unknown paths. */
export function matchRoute(pathname: string, search = ""): RouteMatch | undefined {
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, "") : pathname;
  for (const route of ROUTES) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    const params: Record<string, string> = {};
    route.keys.forEach((k, i) => {
      params[k] = decodeURIComponent(m[i + 1]);
    });
    return { name: route.name, params, query: new URLSearchParams(search) };
  }
  return undefined;
}
