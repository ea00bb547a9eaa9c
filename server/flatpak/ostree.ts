/**
 * Reads one file of one ref of a remote OSTree repository in archive mode (what Flatpak repositories
 * are), over plain HTTP GETs: the ref's commit (from `refs/heads/…`, or the repository `summary` when
 * the repository publishes no loose refs), the commit's root directory tree, the file's object (a
 * header, then the raw-deflated content). Used to fetch a repository's AppStream data from its
 * `appstream2/<arch>` (uncompressed) or `appstream/<arch>` (gzip) branch.
 *
 * @module
 */

import { decodeGVariant, type GValue, hex } from "./gvariant.ts";

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
  const [refs] = decodeGVariant("(a(s(taya{sv}))a{sv})", summary) as [GValue[], GValue];
  for (const entry of refs as GValue[][]) {
    const [name, [, checksum]] = entry as [string, [bigint, Uint8Array, GValue]];
    if (name === ref && checksum instanceof Uint8Array && checksum.length === 32) return hex(checksum);
  }
  return undefined;
}

/** The content of the file `name` at the root of the tree of commit `commit`; undefined when absent. */
export async function readRootFile(
  get: RepoGet,
  commit: string,
  name: string,
): Promise<Uint8Array | undefined> {
  const commitValue = decodeGVariant("(a{sv}aya(say)sstayay)", await need(get, objectPath(commit, "commit")));
  const rootTree = (commitValue as GValue[])[6] as Uint8Array;
  if (!(rootTree instanceof Uint8Array) || rootTree.length !== 32) {
    throw new Error("the commit has no root tree");
  }
  const [files] = decodeGVariant(
    "(a(say)a(sayay))",
    await need(get, objectPath(hex(rootTree), "dirtree")),
  ) as [
    GValue[][],
  ];
  const file = files.find(([fileName]) => fileName === name);
  if (!file) return undefined;
  const object = await need(get, objectPath(hex(file[1] as Uint8Array), "filez"));
  if (object.length < 8) throw new Error(`object of ${name} is truncated`);
  const headerSize = new DataView(object.buffer, object.byteOffset).getUint32(0, false);
  const start = 8 + headerSize;
  if (start > object.length) throw new Error(`object of ${name} has a bad header`);
  const stream = new Blob([object.subarray(start) as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new DecompressionStream("deflate-raw"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
