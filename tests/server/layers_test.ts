/**
 * The floors of server/ (docs/architecture.md, "Server floors"): a part imports only parts on a lower floor,
 * or on its own floor in one direction. The table below is the plan the docs draw; a folder or top-level
 * file that is not in it fails the test until it is given a floor.
 */
import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";

/** Parts of server/ (a folder with a trailing slash, or a file), from the ground floor up. */
const FLOORS: readonly (readonly string[])[] = [
  ["core/", "config/", "catalogues/"], // ground: imports nothing of server/
  ["db/"], // storage
  ["pki/", "audit/"], // keys and records
  ["context.ts"], // what services and transports receive
  ["metrics/", "events/"], // counters and notices (domain code publishes notices)
  ["domain/", "auth/"], // the rules: throw DomainError, know no transport
  ["hub/", "flatpak/", "disk_encryption/", "acme/", "trends/"], // services
  ["http/", "grpc/", "cli/"], // transports
  ["web_port.ts", "workers/", "offloop/", "tools/", "server.ts", "main.ts"], // wiring
];

const SERVER = new URL("../../server/", import.meta.url).pathname;
const IMPORT =
  /(?:import|export)\s[^'"]*?from\s*["']([^"']+)["']|import\s*\(\s*["']([^"']+)["']|import\s+["']([^"']+)["']/g;

function floorOf(part: string): number {
  const floor = FLOORS.findIndex((parts) => parts.includes(part));
  assert.ok(floor >= 0, `server/${part} has no floor: add it to FLOORS here and to docs/architecture.md`);
  return floor;
}

/** The part a path under server/ belongs to: its first folder, or the file itself. */
function partOf(path: string): string {
  const [first, ...rest] = relative(SERVER, path).split("/");
  return rest.length > 0 ? `${first}/` : first;
}

async function* sourceFiles(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) yield* sourceFiles(path);
    else if (entry.name.endsWith(".ts")) yield path;
  }
}

/** Every import between two parts of server/: `from -> to`, with one file pair that shows it. */
async function partImports(): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for await (const file of sourceFiles(SERVER)) {
    for (const m of (await Deno.readTextFile(file)).matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3];
      if (!spec.startsWith(".")) continue;
      const target = normalize(join(dirname(file), spec));
      if (!target.startsWith(SERVER)) continue;
      const from = partOf(file), to = partOf(target);
      if (from !== to) found.set(`${from} -> ${to}`, `${relative(SERVER, file)} imports ${spec}`);
    }
  }
  return found;
}

Deno.test("server/ imports only downward: no part imports a higher floor, none imports another both ways", async () => {
  const imports = await partImports();
  assert.ok(imports.size > 50, `only ${imports.size} imports between parts were found: the scan is broken`);
  const wrong: string[] = [];
  for (const [pair, example] of imports) {
    const [from, to] = pair.split(" -> ");
    if (floorOf(to) > floorOf(from)) wrong.push(`${pair} runs up a floor (${example})`);
    if (imports.has(`${to} -> ${from}`)) wrong.push(`${pair} is imported both ways (${example})`);
  }
  assert.deepEqual(wrong, [], "move the code to the floor it belongs to, or pass what it needs down");
});

Deno.test("the floor check sees an import that runs up", () => {
  assert.ok(floorOf("http/") > floorOf("auth/"));
  assert.throws(() => floorOf("nowhere/"), /has no floor/);
  assert.equal(partOf(join(SERVER, "http/routes/auth.ts")), "http/");
  assert.equal(partOf(join(SERVER, "context.ts")), "context.ts");
});
