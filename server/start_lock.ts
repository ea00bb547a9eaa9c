/**
 * `server/start.lock`: the part of `deno.lock` that the server itself reaches, for `deno task start`.
 *
 * Why a second lock file: with Deno's global cache, `deno run` downloads every npm package its lock file
 * names, so running the server against `deno.lock` would fetch the browser-test and build tools
 * (puppeteer-core, axe-core, fast-check, the web UI's sources) on a fresh clone. This file holds the same
 * pins as `deno.lock`, cut down to the packages reachable from the server's modules (the entry point and
 * the off-loop worker it starts by URL), so the start task downloads only what the server runs and stays
 * frozen to the versions the suite tested.
 *
 *   deno task start:lock           rewrites server/start.lock from deno.lock
 *   deno task start:lock --check   fails when server/start.lock is not what deno.lock gives
 */

const ROOT = new URL("../", import.meta.url);
/** Modules the server loads: its entry point and the worker `server/offloop/jobs.ts` starts by URL. */
const ENTRIES = ["server/main.ts", "server/offloop/worker.ts"];
const START_LOCK = "server/start.lock";

interface Lockfile {
  version: string;
  specifiers?: Record<string, string>;
  npm?: Record<string, Record<string, unknown>>;
  [section: string]: unknown;
}

interface ModuleInfo {
  kind: string;
  npmPackage?: string;
}

interface Info {
  modules: ModuleInfo[];
  npmPackages: Record<string, { dependencies: string[] }>;
}

/** npm package ids (as `deno.lock` keys them) reachable from the server's modules. */
async function reachablePackages(): Promise<Set<string>> {
  const reached = new Set<string>();
  for (const entry of ENTRIES) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", "--node-modules-dir=none", entry],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(`deno info ${entry} failed: ${new TextDecoder().decode(out.stderr)}`);
    }
    const info: Info = JSON.parse(new TextDecoder().decode(out.stdout));
    const pending = info.modules.flatMap((m) => m.kind === "npm" && m.npmPackage ? [m.npmPackage] : []);
    while (pending.length > 0) {
      const id = pending.pop()!;
      if (reached.has(id)) continue;
      reached.add(id);
      pending.push(...(info.npmPackages[id]?.dependencies ?? []));
    }
  }
  return reached;
}

/** `deno.lock` cut down to `reached`; the workspace section stays whole so Deno sees the same config. */
export function startLockFrom(lock: Lockfile, reached: Set<string>): Lockfile {
  const npm = Object.fromEntries(Object.entries(lock.npm ?? {}).filter(([id]) => reached.has(id)));
  const specifiers = Object.fromEntries(
    Object.entries(lock.specifiers ?? {}).filter(([spec, resolved]) => {
      if (!spec.startsWith("npm:")) return true;
      const name = spec.slice(4).replace(/(.)@[^@]*$/, "$1");
      return reached.has(`${name}@${resolved}`);
    }),
  );
  return { ...lock, specifiers, npm };
}

async function expectedStartLock(): Promise<string> {
  const lock: Lockfile = JSON.parse(await Deno.readTextFile(new URL("deno.lock", ROOT)));
  return JSON.stringify(startLockFrom(lock, await reachablePackages()), null, 2) + "\n";
}

if (import.meta.main) {
  const expected = await expectedStartLock();
  const path = new URL(START_LOCK, ROOT);
  if (Deno.args.includes("--check")) {
    const actual = await Deno.readTextFile(path).catch(() => "");
    if (actual !== expected) {
      console.error(`${START_LOCK} does not match deno.lock: run \`deno task start:lock\` and commit it`);
      Deno.exit(1);
    }
  } else {
    await Deno.writeTextFile(path, expected);
    console.log(`wrote ${START_LOCK}`);
  }
}
