/**
 * What a type whose settings the browsers carry in their own policy files (Certificates, Proxy; see
 * `BrowserCompanion`) reads back: each installed browser's file, read with the family's own reader, and whether
 * that browser version knows the keys.
 *
 * @module
 */

import type { EnforcerIO } from "../sync/types.ts";
import type { BrowserFamily, BrowserTarget } from "./browser_enforcer.ts";

/** One installed browser's policy file as the browser reads it. */
export interface BrowserView {
  target: BrowserTarget;
  /** Its policy keys, or why they could not be read. */
  keys: Record<string, unknown> | string;
  /** Why the browser ignores one of the asked keys (a version that does not know it), keyed by key. */
  ignored: Map<string, string>;
}

/** The policy file of every installed browser of `family`, and what it ignores of `keys`. */
export async function browserViews(
  io: EnforcerIO,
  family: BrowserFamily,
  keys: readonly string[],
): Promise<BrowserView[]> {
  const { targets } = await family.locate(io);
  const views: BrowserView[] = [];
  for (const target of targets) {
    const text = await io.fs.readTextFile(target.path).catch((err) =>
      `cannot read: ${(err as Error).message}`
    );
    const read = text === undefined ? "the file is missing" : target.readBack(text);
    const ignored = new Map<string, string>();
    if (typeof read !== "string") {
      const asked = Object.fromEntries(keys.filter((k) => Object.hasOwn(read, k)).map((k) => [k, read[k]]));
      const reasons = await target.effective?.(io, asked).catch(() => undefined);
      for (const [key, reason] of reasons ?? []) {
        ignored.set(key, typeof reason === "string" ? reason : reason.inapplicable);
      }
    }
    views.push({ target, keys: read, ignored });
  }
  return views;
}
