/**
 * Reads one file of one ref of a remote OSTree repository in archive mode (what Flatpak repositories
 * are), over plain HTTP GETs: the ref's commit (from `refs/heads/…`, or the repository `summary` when
 * the repository publishes no loose refs), the commit's root directory tree, the file's object (a
 * header, then the raw-deflated content). Used to fetch a repository's AppStream data from its
 * `appstream2/<arch>` (uncompressed) or `appstream/<arch>` (gzip) branch.
 *
 * Everything here comes from a stranger's server: only the members needed are decoded, the summary's refs
 * and a tree's files are looked through one entry at a time with a turn of the event loop every few
 * milliseconds (a summary may list millions), and the file is inflated to at most the download limit.
 *
 * @module
 */

import { decodeGVariant, hex, tupleElements, tupleMember } from "./gvariant.ts";
import { LONG_WORK_MS, nextTurn } from "../core/loop_turn.ts";

/** GETs a path relative to the repository; undefined when it is not there (404). */
export type RepoGet = (path: string) => Promise<Uint8Array | undefined>;

const CHECKSUM = /^[0-9a-f]{64}$/;

function objectPath(checksum: string, kind: "commit" | "dirtree" | "filez"): string {
  if (!CHECKSUM.test(checksum)) throw new Error(`"${checksum}" is not an OSTree checksum`);
  return `objects/${checksum.slice(0, 2)}/${checksum.slice(2)}.${kind}`;
}

async function need(get: RepoGet, path: string): Promise<Uint8Array> {
  const bytes = await get(path);
  if (!bytes) throw new Error(`the repository has no ${path}`);
  return bytes;
}

/** The commit checksum of `ref`, or undefined when the repository does not have it. */
export async function resolveRef(get: RepoGet, ref: string): Promise<string | undefined> {
  const loose = await get(`refs/heads/${ref}`);
  if (loose) {
    const text = new TextDecoder().decode(loose).trim();
    if (CHECKSUM.test(text)) return text;
  }
  const summary = await get("summary");
  if (!summary) return undefined;
  const wanted = new TextEncoder().encode(`${ref}\0`);
  const found = await findEntry(
    tupleMember("(a(s(taya{sv}))a{sv})", summary, 0),
    "a(s(taya{sv}))",
    wanted,
  );
  if (!found) return undefined;
  const checksum = decodeGVariant("ay", tupleMember("(taya{sv})", found[1], 1));
  return checksum instanceof Uint8Array && checksum.length === 32 ? hex(checksum) : undefined;
}

/**
 * The members of the first entry of an array of tuples (`signature`) whose first member, a string, is
 * `name` (as its serialized bytes, NUL included). Yields to the event loop while it looks.
 */
async function findEntry(
  bytes: Uint8Array,
  signature: string,
  name: Uint8Array,
): Promise<Uint8Array[] | undefined> {
  let started = performance.now();
  let seen = 0;
  for (const members of tupleElements(signature, bytes)) {
    const first = members[0];
    if (first.length === name.length && first.every((byte, i) => byte === name[i])) return members;
    if (++seen % 256 === 0 && performance.now() - started > LONG_WORK_MS) {
      await nextTurn();
      started = performance.now();
    }
  }
  return undefined;
}

/**
 * The content of the file `name` at the root of the tree of commit `commit`; undefined when absent. The
 * file is inflated to at most `maxBytes`.
 */
export async function readRootFile(
  get: RepoGet,
  commit: string,
  name: string,
  maxBytes: number,
): Promise<Uint8Array | undefined> {
  const commitObject = await need(get, objectPath(commit, "commit"));
  const rootTree = decodeGVariant("ay", tupleMember("(a{sv}aya(say)sstayay)", commitObject, 6));
  if (!(rootTree instanceof Uint8Array) || rootTree.length !== 32) {
    throw new Error("the commit has no root tree");
  }
  const tree = await need(get, objectPath(hex(rootTree), "dirtree"));
  const file = await findEntry(
    tupleMember("(a(say)a(sayay))", tree, 0),
    "a(say)",
    new TextEncoder().encode(`${name}\0`),
  );
  if (!file) return undefined;
  const checksum = decodeGVariant("ay", file[1]) as Uint8Array;
  const object = await need(get, objectPath(hex(checksum), "filez"));
  if (object.length < 8) throw new Error(`object of ${name} is truncated`);
  const headerSize = new DataView(object.buffer, object.byteOffset).getUint32(0, false);
  const start = 8 + headerSize;
  if (start > object.length) throw new Error(`object of ${name} has a bad header`);
  const reader = new Blob([object.subarray(start) as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new DecompressionStream("deflate-raw"),
  ).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > maxBytes) {
        throw new Error(`${name} inflates beyond ${maxBytes} bytes (flatpak.catalog_max_bytes)`);
      }
      chunks.push(value);
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return await new Blob(chunks as Uint8Array<ArrayBuffer>[]).bytes();
}
