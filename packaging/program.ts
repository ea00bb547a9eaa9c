/**
 * The two programs in their shipped form. Each is a directory that installs as `/usr/lib/<app>/` with
 * the executable at `<dir>/<app>`:
 *
 * - compiled (`deno compile --target …`, needs Deno's `denort` via `DENORT_BIN`): the directory holds
 *   the single executable;
 * - portable (`--portable`, no denort): `<app>` is a launcher script, `lib/deno` the Deno runtime of the
 *   target arch, `lib/<app>.js` the whole program bundled (npm packages included; the agent's lazily
 *   loaded parts as chunk modules beside it, see `BUNDLE`), its worker modules bundled beside it (the
 *   server's `lib/worker.js`), and
 *   for the server the data files PGlite loads next to its module (`pglite.wasm`, `initdb.wasm`,
 *   `pglite.data`). The web UI is already a generated module, protobuf code is generated TypeScript, and
 *   the migrations are compiled into the bundle, so nothing is read from a checkout.
 *
 * @module
 */
import type { App, ArchInfo } from "./targets.ts";
import { run } from "./exec.ts";
import { readMigrations } from "../server/db/migrate.ts";
import { PORTABLE_RUN_FLAGS } from "../shared/portable_run.ts";

/** Every permission flag: both programs need all of them, each for its own reasons (below). */
const ALL_PERMISSIONS: readonly string[] = [
  "--allow-net",
  "--allow-read",
  "--allow-write",
  "--allow-env",
  "--allow-sys",
  "--allow-run",
  "--allow-ffi",
];

/** Deno permissions each program runs with (the launcher and `deno compile` pass exactly these). */
export const PERMISSIONS: Record<App, string[]> = {
  // Listeners, database and CA files, configuration from the environment, host name for the replica id;
  // starting its own policy workers (server.policy_workers) again from the same runtime and bundle; the
  // system's libgssapi_krb5 (KerberosEnroll) and a PKCS#11 module (CA key on a token) through FFI.
  "svc-server": [...ALL_PERMISSIONS],
  // As the server, plus running the system tools policies are enforced and read back with; FFI for the
  // machine keytab's SPNEGO token (Kerberos enrollment through the system GSSAPI).
  "svc-agent": [...ALL_PERMISSIONS],
};

/**
 * V8 flags each program runs with (the launcher and `deno compile` pass exactly these). The agent idles on
 * every managed machine, so it trades speed it does not need for memory: lite mode (no optimizing compiler,
 * feedback allocated lazily), a 1 MiB young-generation semi-space and V8's size-over-speed heuristics.
 * bench/agent_footprint.ts measures them (README, Benchmarks): idle RSS 85 → 72.5 MiB, the 50-policy sync
 * unchanged at ~50 ms. Lite mode also removes `WebAssembly` (V8 runs without a JIT): the agent uses none (the
 * bundled long.js tries it and falls back); FFI (GSSAPI) works. The server keeps no flags: PGlite is wasm.
 */
export const V8_FLAGS: Record<App, string[]> = {
  "svc-server": [],
  "svc-agent": ["--lite-mode", "--max-semi-space-size=1", "--optimize-for-size"],
};

/** `--v8-flags=…` for `flags`, or nothing. */
function v8FlagArgs(flags: readonly string[]): string[] {
  return flags.length ? [`--v8-flags=${flags.join(",")}`] : [];
}

/**
 * The `deno run` arguments of the portable launcher before the program: no network, checkout, npm cache
 * or code cache, then the V8 flags (default `V8_FLAGS[app]`) and the permissions. bench/agent_footprint.ts
 * runs the agent with exactly these.
 */
export function portableRunArgs(app: App, v8Flags: readonly string[] = V8_FLAGS[app]): string[] {
  return [
    "run",
    ...PORTABLE_RUN_FLAGS,
    ...v8FlagArgs(v8Flags),
    ...PERMISSIONS[app],
  ];
}

/** Files PGlite fetches relative to its own module; they must sit next to the server bundle. */
const PGLITE_ASSETS = ["pglite.wasm", "initdb.wasm", "pglite.data"];

const ENTRY: Record<App, string> = { "svc-server": "server/main.ts", "svc-agent": "agent/main.ts" };

/**
 * Worker modules a program starts with `new Worker(new URL(…, import.meta.url))`. A compiled build includes
 * the source module; the portable build bundles each into `lib/<name>.js` beside the program's bundle, where
 * the program looks for it (server/offloop/jobs.ts). Without it the server would parse bundles and large
 * policy content on its event loop.
 */
const WORKERS: Record<App, string[]> = { "svc-server": ["server/offloop/worker.ts"], "svc-agent": [] };

/**
 * The module graph's entry for `app`: the agent's own `main.ts`; for the server, a generated module that
 * embeds the migrations is evaluated before `server/main.ts` (import order is evaluation order, and it has
 * no top-level await), so `migrate` finds them before the server starts.
 */
async function writeEntry(app: App, root: string, workDir: string): Promise<string> {
  const main = new URL(ENTRY[app], `file://${root}/`).href;
  const entry = `${workDir}/${app}.entry.ts`;
  if (app === "svc-agent") return new URL(ENTRY[app], `file://${root}/`).pathname;
  const migrations = await readMigrations(new URL("migrations/", `file://${root}/`));
  const migrate = new URL("server/db/migrate.ts", `file://${root}/`).href;
  await Deno.writeTextFile(
    `${workDir}/migrations.gen.ts`,
    `// Generated by packaging/program.ts from migrations/*.sql.\n` +
      `import { embedMigrations } from ${JSON.stringify(migrate)};\n` +
      `embedMigrations(${JSON.stringify(migrations)});\n`,
  );
  // A bundled module's `import.meta.main` is false unless it is the entry, so the entry calls main().
  await Deno.writeTextFile(
    entry,
    `import "./migrations.gen.ts";\nimport { main } from ${JSON.stringify(main)};\nawait main();\n`,
  );
  return entry;
}

/**
 * How each program is bundled. The agent is split at its dynamic imports (`--code-splitting`): its
 * enforcers, enrollment and X.509 code sit in chunk modules beside `lib/svc-agent.js` that are read when
 * first used, instead of being parsed at start and kept in memory as source for as long as the agent runs
 * (bench/agent_footprint.ts: idle RSS about 6 MiB lower). `@grpc/proto-loader` (and protobufjs, long and
 * lodash with it) stays out of the agent: grpc-js requires it only to build its channelz and ORCA service
 * definitions, which the agent never serves (svc's messages are protobuf-es); were it ever required, the
 * call would fail with "Cannot find module". The server stays one module.
 */
const BUNDLE: Record<App, { split: boolean; external: string[] }> = {
  "svc-server": { split: false, external: [] },
  "svc-agent": { split: true, external: ["@grpc/proto-loader"] },
};

/** `server/offloop/worker.ts` → `worker.js`. */
function moduleFileName(module: string): string {
  return module.slice(module.lastIndexOf("/") + 1).replace(/\.ts$/, ".js");
}

/**
 * Bundles `app` (arch-independent JavaScript) into `workDir/<app>.js`, and each of its worker modules into
 * `workDir/<worker>.js` beside it; a split program goes to `workDir/<app>/<app>.js` with its chunks beside
 * it. Returns the program bundle's path.
 */
export async function bundleApp(app: App, options: { root: string; workDir: string }): Promise<string> {
  const entry = await writeEntry(app, options.root, options.workDir);
  const bundle = (output: string[], input: string, extra: string[] = []) =>
    run(Deno.execPath(), [
      "bundle",
      "--quiet",
      "--platform",
      "deno",
      "--config",
      `${options.root}/deno.json`,
      ...extra,
      ...output,
      input,
    ], { cwd: options.root });
  const { split, external } = BUNDLE[app];
  const extra = external.flatMap((name) => ["--external", name]);
  let out = `${options.workDir}/${app}.js`;
  if (split) {
    const dir = `${options.workDir}/${app}`;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await bundle(["--outdir", dir], entry, ["--code-splitting", ...extra]);
    // The entry keeps the program's name; chunks never import the entry, so renaming it is safe.
    out = `${dir}/${app}.js`;
    await Deno.rename(`${dir}/${moduleFileName(entry)}`, out);
  } else {
    await bundle(["-o", out], entry, extra);
  }
  for (const worker of WORKERS[app]) {
    await bundle(["-o", `${options.workDir}/${moduleFileName(worker)}`], `${options.root}/${worker}`);
  }
  return out;
}

/** The launcher of the portable form: resolves its own location (it is reached through /usr/bin). */
export function launcherScript(app: App): string {
  return `#!/bin/sh
# ${app} launcher (portable build): runs the bundled program on the Deno runtime shipped beside it, with
# the permissions ${app} needs and nothing else. No network, checkout or npm cache is used.
self=$(readlink -f "$0") || exit 1
lib="\${self%/*}/lib"
export DENO_NO_UPDATE_CHECK=1 DENO_NO_PROMPT=1
exec "$lib/deno" ${portableRunArgs(app).join(" ")} \\
  "$lib/${app}.js" "$@"
`;
}

/** Assembles the portable directory of `app` for `arch` at `dir`. */
export async function assemblePortable(
  app: App,
  options: { dir: string; bundle: string; runtime: string; root: string },
): Promise<void> {
  const { dir } = options;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(`${dir}/lib`, { recursive: true });
  await Deno.copyFile(options.runtime, `${dir}/lib/deno`);
  await Deno.chmod(`${dir}/lib/deno`, 0o755);
  await Deno.copyFile(options.bundle, `${dir}/lib/${app}.js`);
  await Deno.chmod(`${dir}/lib/${app}.js`, 0o644);
  if (BUNDLE[app].split) {
    const bundleDir = options.bundle.slice(0, options.bundle.lastIndexOf("/"));
    for await (const chunk of Deno.readDir(bundleDir)) {
      if (!chunk.isFile || !chunk.name.endsWith(".js") || chunk.name === `${app}.js`) continue;
      await Deno.copyFile(`${bundleDir}/${chunk.name}`, `${dir}/lib/${chunk.name}`);
      await Deno.chmod(`${dir}/lib/${chunk.name}`, 0o644);
    }
  }
  for (const worker of WORKERS[app]) {
    const name = moduleFileName(worker);
    await Deno.copyFile(
      `${options.bundle.slice(0, options.bundle.lastIndexOf("/"))}/${name}`,
      `${dir}/lib/${name}`,
    );
    await Deno.chmod(`${dir}/lib/${name}`, 0o644);
  }
  if (app === "svc-server") {
    const pglite = `${options.root}/node_modules/@electric-sql/pglite/dist`;
    for (const name of PGLITE_ASSETS) {
      await Deno.copyFile(`${pglite}/${name}`, `${dir}/lib/${name}`);
      await Deno.chmod(`${dir}/lib/${name}`, 0o644);
    }
  }
  await Deno.writeTextFile(`${dir}/${app}`, launcherScript(app));
  await Deno.chmod(`${dir}/${app}`, 0o755);
}

/** Compiles `app` for `arch` into `dir/<app>` with `deno compile` (denort from `DENORT_BIN`). */
export async function compileApp(
  app: App,
  arch: ArchInfo,
  options: { dir: string; root: string; workDir: string },
): Promise<void> {
  const entry = await writeEntry(app, options.root, options.workDir);
  await Deno.remove(options.dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(options.dir, { recursive: true });
  const include = app === "svc-server"
    ? PGLITE_ASSETS.flatMap((
      n,
    ) => ["--include", `${options.root}/node_modules/@electric-sql/pglite/dist/${n}`])
    : [];
  include.push(...WORKERS[app].flatMap((w) => ["--include", `${options.root}/${w}`]));
  await run(Deno.execPath(), [
    "compile",
    "--no-check",
    "--config",
    `${options.root}/deno.json`,
    "--target",
    arch.denoTarget,
    ...v8FlagArgs(V8_FLAGS[app]),
    ...PERMISSIONS[app],
    ...include,
    "-o",
    `${options.dir}/${app}`,
    entry,
  ], { cwd: options.root });
}

/**
 * True when `deno compile` can produce an executable for `arch` here: denort comes from `DENORT_BIN` or is
 * downloaded from Deno's host (tried with a one-line module, so a missing runtime fails fast and clearly).
 */
export async function canCompile(arch: ArchInfo, workDir: string): Promise<boolean> {
  const src = `${workDir}/probe.ts`;
  await Deno.writeTextFile(src, "console.log(1);\n");
  try {
    await run(Deno.execPath(), [
      "compile",
      "--no-config",
      "--target",
      arch.denoTarget,
      "-o",
      `${workDir}/probe`,
      src,
    ]);
    // A full deno binary given as DENORT_BIN "compiles" but ignores the program: run it where we can.
    const host = Deno.build.arch === "x86_64" ? "amd64" : "arm64";
    return host !== arch.name || (await run(`${workDir}/probe`, [])).trim() === "1";
  } catch {
    return false;
  } finally {
    await Deno.remove(`${workDir}/probe`).catch(() => {});
  }
}
