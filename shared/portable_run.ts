/**
 * The `deno run` flags the portable build starts its bundle with: no configuration file, lock file, remote
 * imports, npm resolution or code cache, only what was vendored into the bundle. The launcher
 * (packaging/program.ts) and the server starting its policy workers again from the same bundle
 * (server/workers/supervisor.ts) must pass the same ones, so they live here once.
 *
 * @module
 */

/** `deno run` flags of the portable launcher, before the V8 flags and the permissions. */
export const PORTABLE_RUN_FLAGS: readonly string[] = [
  "--no-config",
  "--no-lock",
  "--no-remote",
  "--no-npm",
  "--cached-only",
  "--no-code-cache",
];
