/**
 * Every server parser of input from strangers, fed pathological input at the largest size it accepts:
 * AppStream catalogues (uploads and remote repositories, up to `flatpak.catalog_max_bytes`), OSTree
 * summaries and directory trees of a remote repository (GVariant), `.flatpakrepo` files (up to the 1 MiB
 * fetched), and policy bundles (YAML, up to MAX_BUNDLE_BYTES; parsed in a worker).
 *
 * Two assertions per parser, chosen for a loaded 2-core CI machine:
 * - the work is linear: processor time for 4N bytes stays under 8× that for N (a quadratic parser makes
 *   it 16×; the AppStream regex this replaces took 20 s for 644 KiB). The ratio, not a time budget, is what
 *   the load cannot fake; each side is the least of a few runs;
 * - the event loop is never held for 50 ms at the maximum size: the worst gap between two turns, counted
 *   in the loop thread's own processor time (tests/helpers/stall.ts, best of three attempts: a garbage
 *   collection or the machine's noise rarely lands on all three, work that holds the loop does every time).
 *   The parsers give the loop a turn every few milliseconds, so this holds with room to spare.
 *
 * Not here: LDAP answers (parsed by ldapts from the directory the operator configured, one bounded search
 * per login) and ACME answers (JSON from the configured CA through acme-client): neither comes from an
 * anonymous party, and both are JSON/BER decoders with linear work.
 */
import assert from "node:assert/strict";
import { CONFIG_KEYS } from "../../server/config/config.ts";
import { MAX_APPS, MAX_DEPTH, MAX_TAG_BYTES, readAppstream } from "../../server/flatpak/appstream.ts";
import { MAX_FLATPAKREPO_BYTES, parseFlatpakRepo } from "../../server/flatpak/catalogue.ts";
import { readRootFile, resolveRef } from "../../server/flatpak/ostree.ts";
import { checkBundleText } from "../../server/domain/export_import.ts";
import { MAX_BUNDLE_BYTES } from "../../server/domain/bundle_codec.ts";
import { closeWorkers, keepWorkerWarm } from "../../server/core/offloop.ts";
import { cpuTime, cpuTimeOf, leastStall } from "../helpers/stall.ts";

/** The largest AppStream document accepted by default (`flatpak.catalog_max_bytes`). */
const CATALOG_MAX_BYTES = CONFIG_KEYS.find((k) => k.key === "flatpak.catalog_max_bytes")!.default as number;
const STALL_BOUND_MS = 50;
/** Work for 4N bytes against N: linear is 4, quadratic 16. */
const LINEAR_RATIO = 8;

const encoder = new TextEncoder();

/** `head`, then `unit` repeated to `size` bytes, then `tail`. */
function repeated(head: string, unit: string, size: number, tail = ""): Uint8Array {
  const count = Math.max(0, Math.floor((size - head.length - tail.length) / unit.length));
  return encoder.encode(head + unit.repeat(count) + tail);
}

/** Least processor time of `runs` runs of `work`. */
async function leastCpu(work: () => Promise<unknown>, runs = 3): Promise<number> {
  let least = Infinity;
  for (let i = 0; i < runs; i++) least = Math.min(least, await cpuTimeOf(work));
  return least;
}

/** Asserts that `work(size)` grows linearly from `size` to 4×`size`. */
async function assertLinear(what: string, size: number, work: (size: number) => Promise<unknown>) {
  const small = await leastCpu(() => work(size));
  const large = await leastCpu(() => work(4 * size));
  // Below a few milliseconds the clock's grain decides the ratio; the larger side alone then tells.
  const ratio = large / Math.max(small, 5);
  assert.ok(
    ratio < LINEAR_RATIO,
    `${what}: ${size} bytes took ${small.toFixed(1)} ms, ${4 * size} bytes ${large.toFixed(1)} ms ` +
      `(×${ratio.toFixed(1)}; linear work is about ×4)`,
  );
}

/** Asserts that `work()` never holds the loop for {@link STALL_BOUND_MS}. */
async function assertNoStall(what: string, work: () => Promise<unknown>) {
  const result = await leastStall({ step: async () => void await work(), boundMs: STALL_BOUND_MS });
  assert.ok(result.passed, `${what} held the event loop: ${result.stalls}`);
}

/** Reads an AppStream document; its refusal (a limit) is an answer too. */
async function appstreamOutcome(bytes: Uint8Array): Promise<string> {
  try {
    return `${(await readAppstream(bytes, { maxBytes: CATALOG_MAX_BYTES })).apps.length} apps`;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Pathological AppStream documents of `size` bytes, by name, with what each must come to. */
const APPSTREAM_CASES: Record<string, { make: (size: number) => Uint8Array; outcome: RegExp }> = {
  // The reported attack: start tags that never close (the old regex rescanned the rest for each).
  "unclosed <component> tags": {
    make: (size) => repeated("<components>", "<component>", size),
    outcome: new RegExp(`deeper than ${MAX_DEPTH} levels`),
  },
  "components that each close an outer element": {
    make: (size) => repeated("<components>", '<x><component type="desktop-application"><id>a.b.c</x>', size),
    outcome: /^1 apps$/,
  },
  "stray end tags": { make: (size) => repeated("<components>", "</component>", size), outcome: /^0 apps$/ },
  "stray end tags under deep nesting": {
    make: (size) => repeated(`<components>${"<a>".repeat(MAX_DEPTH - 2)}`, "</b>", size),
    outcome: /^0 apps$/,
  },
  "tiny empty elements": { make: (size) => repeated("<components>", "<a/>", size), outcome: /^0 apps$/ },
  "one tag that never ends": {
    make: (size) => repeated("<components><component ", "a", size),
    outcome: new RegExp(`tag longer than ${MAX_TAG_BYTES} bytes`),
  },
  "an attribute name without a value": {
    make: (size) => repeated("<components>", `<component ${"n".repeat(4000)}>`, size),
    outcome: new RegExp(`deeper than ${MAX_DEPTH} levels`),
  },
  "a comment that never ends": {
    make: (size) => repeated("<components><!--", "-", size),
    outcome: /^0 apps$/,
  },
  "a CDATA section of brackets in a field": {
    make: (size) => repeated("<components><component><name><![CDATA[", "]", size),
    outcome: /^0 apps$/,
  },
  "character references in a field": {
    make: (size) => repeated("<components><component><id>", "&#x41;&amp;", size),
    outcome: /^0 apps$/,
  },
  "a declaration with an endless internal subset": {
    make: (size) => repeated("<!DOCTYPE components [", '<!ENTITY a "[">', size),
    outcome: /not an AppStream catalogue/,
  },
  "more applications than the limit": {
    make: (size) => {
      const apps = Math.min(Math.floor(size / 80), MAX_APPS + 1);
      const parts = ["<components>"];
      for (let i = 0; i < apps; i++) parts.push(`<component><id>org.example.A${i}</id></component>`);
      parts.push("</components>");
      return encoder.encode(parts.join(""));
    },
    outcome: new RegExp(`^\\d+ apps$|more than ${MAX_APPS} applications`),
  },
};

for (const [name, { make, outcome }] of Object.entries(APPSTREAM_CASES)) {
  Deno.test(`AppStream, ${name}: linear work, no stall at ${CATALOG_MAX_BYTES} bytes`, async () => {
    const inputs = new Map<number, Uint8Array>();
    const input = (size: number) => inputs.get(size) ?? inputs.set(size, make(size)).get(size)!;
    await assertLinear(`AppStream ${name}`, 1 << 20, (size) => appstreamOutcome(input(size)));
    inputs.clear();
    const largest = make(CATALOG_MAX_BYTES);
    assert.ok(largest.length <= CATALOG_MAX_BYTES);
    let answer = "";
    await assertNoStall(`AppStream ${name}`, async () => answer = await appstreamOutcome(largest));
    assert.match(answer, outcome);
  });
}

Deno.test("AppStream: a gzip bomb is cut at the size limit, and unclosed components at the old size are quick", async () => {
  const zeros = new Uint8Array(8 << 20);
  const gzip = new Uint8Array(
    await new Response(new Blob([zeros]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer(),
  );
  await assert.rejects(readAppstream(gzip, { maxBytes: 1 << 20 }), /inflates beyond 1048576 bytes/);
  // The upload of the report: 644 KiB of unclosed <component> tags held the loop for 20 s.
  const reported = repeated("<components>", "<component>", 644 * 1024);
  await assertNoStall("the reported upload", () => appstreamOutcome(reported));
});

// --- OSTree metadata from a remote repository (GVariant) ---

/** A serialized GVariant value: bytes, alignment, and whether its size is fixed. */
interface Serialized {
  bytes: Uint8Array;
  align: number;
  fixed: boolean;
}

function offsetWidth(size: number): number {
  return size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
}

function framed(body: Uint8Array, bodyLength: number, offsets: number[]): Uint8Array {
  let width = 1;
  while (offsetWidth(bodyLength + offsets.length * width) !== width) width *= 2;
  const out = new Uint8Array(bodyLength + offsets.length * width);
  out.set(body.subarray(0, bodyLength));
  offsets.forEach((offset, i) => {
    for (let b = 0; b < width; b++) out[bodyLength + i * width + b] = (offset >>> (8 * b)) & 0xff;
  });
  return out;
}

const str = (text: string): Serialized => ({ bytes: encoder.encode(`${text}\0`), align: 1, fixed: false });
const bytesOf = (bytes: Uint8Array): Serialized => ({ bytes, align: 1, fixed: false });
const uint64 = (): Serialized => ({ bytes: new Uint8Array(8), align: 8, fixed: true });
const emptyDict = (): Serialized => ({ bytes: new Uint8Array(0), align: 8, fixed: false });

/** A tuple of variable size: members aligned, the ends of the variable ones but the last framed (reversed). */
function tuple(members: Serialized[]): Serialized {
  const starts: number[] = [];
  const ends: number[] = [];
  let length = 0;
  members.forEach((member, i) => {
    length = Math.ceil(length / member.align) * member.align;
    starts.push(length);
    length += member.bytes.length;
    if (!member.fixed && i < members.length - 1) ends.push(length);
  });
  const body = new Uint8Array(length);
  members.forEach((member, i) => body.set(member.bytes, starts[i]));
  return {
    bytes: framed(body, length, ends.reverse()),
    align: Math.max(...members.map((m) => m.align)),
    fixed: false,
  };
}

/**
 * An array of `count` copies of one variable-size element, then `last` when given (built by copying, so
 * 64 MiB takes no time).
 */
function arrayOf(element: Serialized, count: number, last?: Serialized): Serialized {
  const stride = Math.ceil(element.bytes.length / element.align) * element.align;
  const copies = count ? (count - 1) * stride + element.bytes.length : 0;
  const lastAt = count * stride;
  const bodyLength = last ? lastAt + last.bytes.length : copies;
  const body = new Uint8Array(bodyLength);
  const ends: number[] = [];
  for (let i = 0; i < count; i++) {
    body.set(element.bytes, i * stride);
    ends.push(i * stride + element.bytes.length);
  }
  if (last) {
    body.set(last.bytes, lastAt);
    ends.push(bodyLength);
  }
  return { bytes: framed(body, bodyLength, ends), align: element.align, fixed: false };
}

/** How many copies of `element` fill about `size` bytes of an array (4-byte offsets). */
function countFor(element: Serialized, size: number): number {
  return Math.floor(size / (Math.ceil(element.bytes.length / element.align) * element.align + 4));
}

/** A summary listing `size` bytes of refs, none of them the one looked for. */
function hostileSummary(size: number): Uint8Array {
  const ref = tuple([str("r"), tuple([uint64(), bytesOf(new Uint8Array(32)), emptyDict()])]);
  return tuple([arrayOf(ref, countFor(ref, size)), emptyDict()]).bytes;
}

const CHECKSUM = "ab".repeat(32);

/** A commit whose root tree is {@link CHECKSUM}. */
function commitObject(): Uint8Array {
  const tree = new Uint8Array(32).fill(0xab);
  return tuple([
    emptyDict(),
    bytesOf(new Uint8Array(0)),
    arrayOf(tuple([str(""), bytesOf(new Uint8Array(32))]), 0),
    str("subject"),
    str("body"),
    uint64(),
    bytesOf(tree),
    bytesOf(tree),
  ]).bytes;
}

/** A directory tree of `size` bytes of files named "f", then `last` when given. */
function hostileTree(size: number, last?: string): Uint8Array {
  const file = (name: string) => tuple([str(name), bytesOf(new Uint8Array(32).fill(0xcd))]);
  const files = arrayOf(file("f"), countFor(file("f"), size), last ? file(last) : undefined);
  const dirs = arrayOf(tuple([str(""), bytesOf(new Uint8Array(32)), bytesOf(new Uint8Array(32))]), 0);
  return tuple([files, dirs]).bytes;
}

/** A repository whose objects are in `files`. */
function repoGet(files: Record<string, Uint8Array>) {
  return (path: string) => Promise.resolve(files[path]);
}

const objectPath = (checksum: string, kind: string) =>
  `objects/${checksum.slice(0, 2)}/${checksum.slice(2)}.${kind}`;

Deno.test(`OSTree summary of millions of refs: linear work, no stall at ${CATALOG_MAX_BYTES} bytes`, async () => {
  const lookUp = (summary: Uint8Array) => resolveRef(repoGet({ summary }), "appstream2/x86_64");
  const inputs = new Map([[1 << 20, hostileSummary(1 << 20)], [4 << 20, hostileSummary(4 << 20)]]);
  await assertLinear("summary", 1 << 20, (size) => lookUp(inputs.get(size)!));
  const largest = hostileSummary(CATALOG_MAX_BYTES);
  let found: string | undefined = "";
  await assertNoStall("summary", async () => found = await lookUp(largest));
  assert.equal(found, undefined);
});

Deno.test(`OSTree directory tree of millions of files: linear work, no stall at ${CATALOG_MAX_BYTES} bytes`, async () => {
  const look = (tree: Uint8Array) =>
    readRootFile(
      repoGet({ [objectPath(CHECKSUM, "commit")]: commitObject(), [objectPath(CHECKSUM, "dirtree")]: tree }),
      CHECKSUM,
      "appstream.xml",
      CATALOG_MAX_BYTES,
    );
  const inputs = new Map([[1 << 20, hostileTree(1 << 20)], [4 << 20, hostileTree(4 << 20)]]);
  await assertLinear("directory tree", 1 << 20, (size) => look(inputs.get(size)!));
  const largest = hostileTree(CATALOG_MAX_BYTES);
  let found: Uint8Array | undefined = new Uint8Array();
  await assertNoStall("directory tree", async () => found = await look(largest));
  assert.equal(found, undefined);
});

Deno.test("OSTree file objects are inflated to the size limit only (a deflate bomb is cut)", async () => {
  const content = "cd".repeat(32);
  const deflated = new Uint8Array(
    await new Response(
      new Blob([new Uint8Array(16 << 20)]).stream().pipeThrough(
        new CompressionStream("deflate-raw"),
      ),
    ).arrayBuffer(),
  );
  const filez = new Uint8Array(8 + deflated.length);
  filez.set(deflated, 8);
  const get = repoGet({
    [objectPath(CHECKSUM, "commit")]: commitObject(),
    [objectPath(CHECKSUM, "dirtree")]: hostileTree(4096, "appstream.xml"),
    [objectPath(content, "filez")]: filez,
  });
  await assert.rejects(
    readRootFile(get, CHECKSUM, "appstream.xml", 1 << 20),
    /appstream\.xml inflates beyond 1048576 bytes \(flatpak\.catalog_max_bytes\)/,
  );
  assert.equal((await readRootFile(get, CHECKSUM, "appstream.xml", 16 << 20))!.length, 16 << 20);
});

// --- .flatpakrepo files (1 MiB when fetched; 64 KiB in a request body) ---

const FLATPAKREPO_CASES: Record<string, (size: number) => string> = {
  "one endless line": (size) => `[Flatpak Repo]\nUrl=https://example.org/${"a".repeat(size)}`,
  "carriage returns without newlines": (size) =>
    `[Flatpak Repo]\nUrl=https://example.org/\n${"\r".repeat(size)}`,
  "keys without values": (size) => `[Flatpak Repo]\nUrl=https://example.org/\n${"k\n".repeat(size / 2)}`,
  "group headers": (size) =>
    `[Flatpak Repo]\nUrl=https://e.org/\n${"[Flatpak Repo]\n[x]\n".repeat(size / 19)}`,
  "equals signs": (size) => `[Flatpak Repo]\nUrl=https://example.org/\n${"=".repeat(size)}`,
};

for (const [name, make] of Object.entries(FLATPAKREPO_CASES)) {
  Deno.test(`.flatpakrepo, ${name}: linear work, no stall at ${MAX_FLATPAKREPO_BYTES} bytes`, () => {
    const least = (text: string) => Math.min(...[0, 1, 2].map(() => cpuTime(() => parseFlatpakRepo(text))));
    // Linearity is measured beyond the limit, where the times are large enough to compare.
    const [small, large] = [least(make(256 * 1024)), least(make(1024 * 1024))];
    assert.ok(
      large / Math.max(small, 5) < LINEAR_RATIO,
      `${name}: 256 KiB took ${small.toFixed(1)} ms, 1 MiB ${large.toFixed(1)} ms`,
    );
    // Synchronous, so its whole processor time is the loop's stall.
    const largest = least(make(MAX_FLATPAKREPO_BYTES).slice(0, MAX_FLATPAKREPO_BYTES));
    assert.ok(
      largest < STALL_BOUND_MS,
      `${name}: ${MAX_FLATPAKREPO_BYTES} bytes held the loop ${largest} ms`,
    );
  });
}

// --- Policy bundles (YAML or JSON, parsed and checked in a worker) ---

const BUNDLE_CASES: Record<string, (size: number) => string> = {
  "deeply nested flow sequences": (size) => "[".repeat(size),
  "aliases of aliases": (size) => {
    const lines = ["a0: &a0 [x]"];
    for (let i = 1, length = 0; length < size - 40; i++) {
      lines.push(`a${i}: &a${i} [*a${i - 1}, *a${i - 1}]`);
      length += lines[i].length + 1;
    }
    return lines.join("\n");
  },
  "many documents": (size) => "---\n".repeat(size / 4),
  "one long plain scalar": (size) => `kind: ${"x ".repeat(size / 2 - 5)}`,
};

for (const [name, make] of Object.entries(BUNDLE_CASES)) {
  Deno.test(`policy bundle, ${name}: refused in a worker without a stall at ${MAX_BUNDLE_BYTES} bytes`, async () => {
    const release = keepWorkerWarm();
    try {
      const text = make(MAX_BUNDLE_BYTES).slice(0, MAX_BUNDLE_BYTES);
      await assert.rejects(checkBundleText(text));
      await assertNoStall(`bundle ${name}`, () => checkBundleText(text).catch(() => {}));
    } finally {
      release();
      closeWorkers();
    }
  });
}
