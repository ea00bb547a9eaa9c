/**
 * The build's modules (packaging/) import each other without a cycle: the format writers and the loop that
 * calls them share what a package is (package_spec.ts) instead of importing each other's modules.
 */
import assert from "node:assert/strict";

const PACKAGING = new URL("../../packaging/", import.meta.url).pathname;
const LOCAL_IMPORT = /(?:import|export)\s[^'"]*?from\s*["']\.\/([a-z_]+\.ts)["']/g;

/** Module → the packaging modules it imports. */
async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  for await (const entry of Deno.readDir(PACKAGING)) {
    if (!entry.isFile || !entry.name.endsWith(".ts")) continue;
    const text = await Deno.readTextFile(`${PACKAGING}${entry.name}`);
    graph.set(entry.name, [...text.matchAll(LOCAL_IMPORT)].map((m) => m[1]));
  }
  return graph;
}

/** One import cycle of `graph` as `a → b → a`, or undefined when there is none. */
function findCycle(graph: Map<string, readonly string[]>): string | undefined {
  const done = new Set<string>();
  const visit = (module: string, path: string[]): string | undefined => {
    const at = path.indexOf(module);
    if (at >= 0) return [...path.slice(at), module].join(" → ");
    if (done.has(module)) return undefined;
    for (const next of graph.get(module) ?? []) {
      const cycle = visit(next, [...path, module]);
      if (cycle) return cycle;
    }
    done.add(module);
    return undefined;
  };
  for (const module of graph.keys()) {
    const cycle = visit(module, []);
    if (cycle) return cycle;
  }
  return undefined;
}

Deno.test("packaging/ modules import each other without a cycle", async () => {
  const graph = await importGraph();
  assert.ok(
    (graph.get("packages.ts") ?? []).includes("deb.ts"),
    "the scan found packages.ts importing deb.ts",
  );
  assert.equal(findCycle(graph), undefined, "share the piece both sides need in a module of its own");
});

Deno.test("the cycle check finds a cycle", () => {
  const graph = new Map([["a.ts", ["b.ts"]], ["b.ts", ["c.ts"]], ["c.ts", ["a.ts"]], ["d.ts", []]]);
  assert.equal(findCycle(graph), "a.ts → b.ts → c.ts → a.ts");
  assert.equal(findCycle(new Map([["a.ts", ["b.ts"]], ["b.ts", []]])), undefined);
});
