/** Client-side navigation: History API changes, query updates and which clicks the app handles itself. */
export { matchRoute, type RouteMatch, type RouteName } from "./routes.ts";

/** Fired on `window` after the URL changed through {@link navigate}. */
export const NAVIGATE_EVENT = "svc-navigate";

/** Changes the URL without reloading and tells the shell. */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (to === location.pathname + location.search) return;
  if (options.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  globalThis.dispatchEvent(new Event(NAVIGATE_EVENT));
}

/** Rewrites the query of the current URL in place (list filters, pages); no new history entry. */
export function setQuery(values: Record<string, string | number | undefined | null>): void {
  const params = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined || v === null || v === "") params.delete(k);
    else params.set(k, String(v));
  }
  const qs = params.toString();
  history.replaceState(null, "", location.pathname + (qs ? `?${qs}` : ""));
}

/** True for a click that the browser should handle itself (new tab, download, other origin…). */
export function isExternalClick(event: MouseEvent, anchor: HTMLAnchorElement): boolean {
  if (event.defaultPrevented || event.button !== 0) return true;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return true;
  if (anchor.target && anchor.target !== "_self") return true;
  if (anchor.hasAttribute("download")) return true;
  const url = new URL(anchor.href, location.href);
  if (url.origin !== location.origin) return true;
  return url.pathname.startsWith("/api/") || url.pathname.startsWith("/agent/") ||
    url.pathname.startsWith("/assets/");
}
