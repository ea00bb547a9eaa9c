/**
 * Which policy names the browser installed on this node knows, read from the browser itself, so a key it
 * would ignore can be reported NON_COMPLIANT instead of "written, therefore fine".
 *
 * - Firefox and Thunderbird ship their policy schema, `modules/policies/policies-schema.json`, inside
 *   `omni.ja` (a zip archive; Firefox: `browser/omni.ja`, Thunderbird: `omni.ja`). Its top-level
 *   `properties` are exactly the policy names the product accepts.
 * - Chrome, Chromium and Edge ship no schema on Linux, but their policy loader matches names against
 *   string constants compiled into the main binary. A name that does not occur in the binary as a
 *   NUL-terminated string cannot be recognised, so "absent from the binary" reliably means "unknown to this
 *   version" (the converse is not claimed: a name can occur for other reasons). As a guard against a binary
 *   that stores its strings differently, a binary in which the long-standing policy `HomepageLocation` is not
 *   found is treated as unreadable. The scan runs `grep -z` (a tenth of a second for 300 MB); results are
 *   cached per binary, size and modification time.
 *
 * A name in the schema is not proof that the build does anything with it: Mozilla keeps retired policies in the
 * schema so old files still validate (Firefox 153 lists `DisablePocket` though Pocket is gone). The build's
 * own implementation, `modules/policies/Policies.sys.mjs` in the same `omni.ja`, has one handler per policy it
 * acts on; a listed policy without a handler is inert, reported INAPPLICABLE with that reason. Where the
 * implementation cannot be read, {@linkcode MOZILLA_INERT_POLICIES} (catalogue metadata per version) decides.
 *
 * When nothing can be read, callers skip the check rather than guess.
 *
 * @module
 */

import type { EnforcerIO } from "../sync/types.ts";
import { readCapped } from "../../shared/bytes.ts";

/** Policy names a browser build knows. */
export interface KnownPolicies {
  /** Human name of the build, e.g. `Firefox 153.7.0` or `Chromium (/usr/lib/chromium/chromium)`. */
  product: string;
  /** Node path the names were read from. */
  source: string;
  /** Whether the build knows the top-level policy `name`. */
  knows(name: string): boolean;
  /** Why the build ignores a policy it knows (it is inert in this version), or undefined. */
  inert?(name: string): string | undefined;
}

/** A policy a Mozilla product still lists in its schema but ignores from a version on. */
export interface InertPolicy {
  /** Application name, e.g. `Firefox`. */
  product: string;
  policy: string;
  /** First major version that ignores it. */
  sinceMajor: number;
  /** What happened, for the message. */
  reason: string;
}

/** Catalogue of inert Mozilla policies, used when the build's implementation cannot be read. */
export const MOZILLA_INERT_POLICIES: readonly InertPolicy[] = [
  { product: "Firefox", policy: "DisablePocket", sinceMajor: 140, reason: "Pocket was removed from Firefox" },
];

const IMPLEMENTATION_ENTRY = "modules/policies/Policies.sys.mjs";

/**
 * The policy names that have a handler in a Mozilla `Policies.sys.mjs`: the top-level members of its
 * `Policies` object (two-space indented `Name: {` or `"name": {`). Undefined when the file is laid out
 * differently (no such object, or implausibly few members), so callers fall back to the catalogue.
 */
export function implementedMozillaPolicies(source: string): Set<string> | undefined {
  const start = source.search(/^export (?:var|let|const) Policies = \{$/m);
  if (start < 0) return undefined;
  const end = source.indexOf("\n};", start);
  if (end < 0) return undefined;
  const body = source.slice(start, end);
  const names = new Set([...body.matchAll(/^ {2}"?([A-Za-z0-9_]+)"?: \{/gm)].map((m) => m[1]));
  return names.size >= 20 ? names : undefined;
}

const MAX_SCHEMA_BYTES = 8 << 20;
const SCHEMA_ENTRY = "modules/policies/policies-schema.json";

/**
 * Reads one entry of a zip archive (stored or deflated). Returns undefined when the archive has no such
 * entry; throws when the file is not a readable zip or the entry is larger than `maxBytes`.
 */
export async function readZipEntry(
  hostPath: string,
  name: string,
  maxBytes = MAX_SCHEMA_BYTES,
): Promise<Uint8Array | undefined> {
  const file = await Deno.open(hostPath, { read: true });
  try {
    const size = (await file.stat()).size;
    const tailLength = Math.min(size, 65_557);
    const tail = await readAt(file, size - tailLength, tailLength);
    const view = new DataView(tail.buffer, tail.byteOffset, tail.byteLength);
    let eocd = -1;
    for (let i = tail.length - 22; i >= 0; i--) {
      if (view.getUint32(i, true) === 0x06054b50) {
        eocd = i;
        break;
      }
    }
    if (eocd < 0) throw new Error(`${hostPath} is not a zip archive (no end of central directory)`);
    const entries = view.getUint16(eocd + 10, true);
    const cdSize = view.getUint32(eocd + 12, true);
    const cdOffset = view.getUint32(eocd + 16, true);
    if (cdOffset + cdSize > size) throw new Error(`${hostPath}: central directory lies outside the file`);
    const cd = await readAt(file, cdOffset, cdSize);
    const cdView = new DataView(cd.buffer, cd.byteOffset, cd.byteLength);
    const wanted = new TextEncoder().encode(name);
    let pos = 0;
    for (let n = 0; n < entries && pos + 46 <= cd.length; n++) {
      if (cdView.getUint32(pos, true) !== 0x02014b50) {
        throw new Error(`${hostPath}: damaged central directory`);
      }
      const method = cdView.getUint16(pos + 10, true);
      const compressed = cdView.getUint32(pos + 20, true);
      const uncompressed = cdView.getUint32(pos + 24, true);
      const nameLength = cdView.getUint16(pos + 28, true);
      const extraLength = cdView.getUint16(pos + 30, true);
      const commentLength = cdView.getUint16(pos + 32, true);
      const localOffset = cdView.getUint32(pos + 42, true);
      const entryName = cd.subarray(pos + 46, pos + 46 + nameLength);
      pos += 46 + nameLength + extraLength + commentLength;
      if (entryName.length !== wanted.length || !entryName.every((b, i) => b === wanted[i])) continue;
      if (uncompressed > maxBytes || compressed > maxBytes) {
        throw new Error(`${hostPath}: ${name} is larger than ${maxBytes} bytes`);
      }
      const local = await readAt(file, localOffset, 30);
      const localView = new DataView(local.buffer, local.byteOffset, local.byteLength);
      if (localView.getUint32(0, true) !== 0x04034b50) throw new Error(`${hostPath}: damaged entry ${name}`);
      const dataOffset = localOffset + 30 + localView.getUint16(26, true) + localView.getUint16(28, true);
      const data = await readAt(file, dataOffset, compressed);
      if (method === 0) return data;
      if (method !== 8) throw new Error(`${hostPath}: ${name} uses unsupported compression method ${method}`);
      return await inflateRaw(data, maxBytes);
    }
    return undefined;
  } finally {
    file.close();
  }
}

async function readAt(file: Deno.FsFile, offset: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  await file.seek(offset, Deno.SeekMode.Start);
  let done = 0;
  while (done < length) {
    const n = await file.read(out.subarray(done));
    if (n === null) throw new Error("unexpected end of file");
    done += n;
  }
  return out;
}

async function inflateRaw(data: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  const stream = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new DecompressionStream("deflate-raw"),
  );
  return await readCapped(
    stream,
    maxBytes,
    () => new Error(`inflated entry is larger than ${maxBytes} bytes`),
  );
}

/**
 * The policy names of a Mozilla application installed in `appDir` (node path, e.g.
 * `/usr/lib/firefox-esr`): its policies-schema.json from `browser/omni.ja` or `omni.ja`, and its
 * version from `application.ini`. Undefined when the directory holds no readable schema.
 */
export async function mozillaKnownPolicies(
  io: EnforcerIO,
  appDir: string,
  productName: string,
): Promise<KnownPolicies | undefined> {
  for (const jar of [`${appDir}/browser/omni.ja`, `${appDir}/omni.ja`]) {
    if (!await io.fs.exists(jar)) continue;
    let bytes: Uint8Array | undefined;
    try {
      bytes = await readZipEntry(await io.fs.resolve(jar), SCHEMA_ENTRY);
    } catch (err) {
      io.logger.warn("cannot read the browser's policy schema", { path: jar, error: (err as Error).message });
      continue;
    }
    if (!bytes) continue;
    let names: Set<string>;
    try {
      const schema = JSON.parse(new TextDecoder().decode(bytes));
      names = new Set(Object.keys(schema?.properties ?? {}));
    } catch {
      io.logger.warn("the browser's policy schema is not JSON", { path: jar });
      continue;
    }
    if (names.size === 0) continue;
    const ini = await io.fs.readTextFile(`${appDir}/application.ini`).catch(() => undefined);
    const version = /^Version=(.+)$/m.exec(ini ?? "")?.[1]?.trim();
    const product = version ? `${productName} ${version}` : productName;
    let implemented: Set<string> | undefined;
    try {
      const code = await readZipEntry(await io.fs.resolve(jar), IMPLEMENTATION_ENTRY);
      implemented = code && implementedMozillaPolicies(new TextDecoder().decode(code));
    } catch (err) {
      io.logger.debug("cannot read the browser's policy implementation", {
        path: jar,
        error: (err as Error).message,
      });
    }
    const major = Number.parseInt(version ?? "", 10);
    return {
      product,
      source: jar,
      knows: (name) => names.has(name),
      inert(name) {
        if (!names.has(name)) return undefined;
        if (implemented) {
          return implemented.has(name)
            ? undefined
            : `${product} lists ${name} in its policy schema but has no ` +
              `handler for it (${IMPLEMENTATION_ENTRY} in ${jar}), so the setting has no effect`;
        }
        const known = MOZILLA_INERT_POLICIES.find((p) =>
          p.policy === name && (productName === p.product || productName.endsWith(` ${p.product}`)) &&
          major >= p.sinceMajor
        );
        return known && `${known.reason} ${known.sinceMajor}; ${product} still lists ${name} in its policy ` +
            "schema but ignores it";
      },
    };
  }
  return undefined;
}

/** A policy every Chromium-family browser has known for over a decade; see the module documentation. */
const CANARY = "HomepageLocation";

interface ScanCache {
  identity: string;
  known: Map<string, boolean>;
}

const scanCache = new Map<string, ScanCache>();

/**
 * The policy names among `names` that the Chromium-family binary at `binary` (node path) contains.
 * Undefined when the binary is missing or cannot be read this way.
 */
export async function chromiumKnownPolicies(
  io: EnforcerIO,
  binary: string,
  productName: string,
  names: Iterable<string>,
): Promise<KnownPolicies | undefined> {
  let hostPath: string;
  let info: Deno.FileInfo | undefined;
  try {
    hostPath = await io.fs.resolve(binary);
    info = await Deno.stat(hostPath);
  } catch {
    return undefined;
  }
  if (!info.isFile) return undefined;
  const identity = `${info.size}:${info.mtime?.getTime() ?? 0}:${info.ino ?? 0}`;
  let cache = scanCache.get(hostPath);
  if (!cache || cache.identity !== identity) {
    cache = { identity, known: new Map() };
    scanCache.set(hostPath, cache);
  }
  const missing = new Set([CANARY, ...names].filter((n) => !cache!.known.has(n)));
  if (missing.size > 0) {
    const started = performance.now();
    const found = await grepNames(io, hostPath, missing);
    if (!found) return undefined;
    for (const name of missing) cache.known.set(name, found.has(name));
    io.logger.debug("scanned a browser binary for policy names", {
      path: binary,
      names: missing.size,
      ms: Math.round(performance.now() - started),
    });
  }
  if (!cache.known.get(CANARY)) return undefined;
  const known = cache.known;
  return { product: `${productName} (${binary})`, source: binary, knows: (name) => known.get(name) === true };
}

/**
 * Which of `names` (policy names: letters, digits, `_`) occur in the file as `<name>\0`, possibly as the
 * tail of a longer string (linkers merge string constants that end alike). Uses `grep -z` (NUL-terminated
 * records) through the runner; undefined when grep is missing or fails. A name that is a suffix of another
 * name found in the same record is looked for again, because grep reports one match per record.
 */
export async function grepNames(
  io: EnforcerIO,
  hostPath: string,
  names: ReadonlySet<string>,
): Promise<Set<string> | undefined> {
  const found = new Set<string>();
  let pending = [...names].filter((n) => /^[A-Za-z][A-Za-z0-9_]*$/.test(n));
  while (pending.length > 0) {
    const result = await io.runner.run(
      "grep",
      ["-z", "-a", "-o", "-E", "-e", `(${pending.join("|")})$`, "--", hostPath],
      { env: { LC_ALL: "C" }, timeoutMs: 120_000 },
    );
    if (result.notFound || result.timedOut || (result.code !== 0 && result.code !== 1)) return undefined;
    const hits = new Set(result.stdout.split("\0").filter((s) => s !== ""));
    for (const hit of hits) found.add(hit);
    pending = pending.filter((n) => !found.has(n) && [...hits].some((h) => h !== n && h.endsWith(n)));
  }
  return found;
}
