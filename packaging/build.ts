/**
 * `deno task build [--portable] [--out DIR]`: builds, from this checkout and its one version,
 * `svc-server` and `svc-agent` for amd64 and arm64, their packages (agent: deb, rpm, apk, Arch; server:
 * deb, rpm), the signed agent repository and its own package (svc-agent-repo: deb, rpm), into `dist/`:
 *
 * ```
 * dist/<app>-linux-<arch>/   the executable (compiled file, or portable directory with launcher)
 * dist/packages/             every package file
 * dist/agent-repo/           the repository the server serves under /agent/ (packaged as svc-agent-repo)
 * dist/build.json            what was built, in which form, with which runtime, and how long it took
 * ```
 *
 * Without `--portable` the programs are `deno compile`d, which needs Deno's `denort` runtime: from
 * `DENORT_BIN` or Deno's download host (probed first with a one-line module per target). When neither is
 * available the build says so in one line naming `DENORT_BIN` and fails; `--portable` then builds the
 * self-contained directory form instead.
 *
 * Signing: `SVC_REPO_SIGNING_KEY_FILE` (an armored OpenPGP secret key without passphrase) signs the
 * repository metadata; without it a clearly labelled build-local key is generated for this build only.
 *
 * @module
 */
import { APPS, ARCHES, PORTABLE_RUNTIME_VERSION } from "./targets.ts";
import { assemblePortable, bundleApp, canCompile, compileApp } from "./program.ts";
import { portableRuntime } from "./runtime.ts";
import { buildAgentRepoPackages, buildPackages } from "./packages.ts";
import { assembleRepo } from "./repo.ts";
import { openSigner, signRpm } from "./signing.ts";
import { VERSION } from "../shared/version.ts";

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");
const USAGE = "usage: deno task build [--portable] [--out DIR]";

interface Args {
  portable: boolean;
  out: string;
}

function parseArgs(args: string[]): Args {
  const out: Args = { portable: false, out: `${ROOT}/dist` };
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--portable") out.portable = true;
    else if (args[i] === "--out" && args[i + 1]) out.out = args[++i];
    else if (args[i] === "--help" || args[i] === "-h") {
      console.log(USAGE);
      Deno.exit(0);
    } else throw new Error(`unknown argument ${args[i]}\n${USAGE}`);
  }
  return out;
}

function step(text: string, started: number): void {
  console.error(`build: ${text} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
}

async function main(): Promise<number> {
  const args = parseArgs(Deno.args);
  const started = performance.now();
  const out = args.out;
  const work = `${out}/.work`;
  await Deno.remove(work, { recursive: true }).catch(() => {});
  await Deno.mkdir(work, { recursive: true });
  if (!args.portable) {
    for (const arch of ARCHES) {
      if (await canCompile(arch, work)) continue;
      console.error(
        `build: deno compile cannot get Deno's denort runtime for ${arch.denoTarget} (download failed and ` +
          "DENORT_BIN is not a usable denort): set DENORT_BIN, or run `deno task build --portable`",
      );
      await Deno.remove(work, { recursive: true }).catch(() => {});
      return 1;
    }
  }
  for (const app of APPS) {
    for (const arch of ARCHES) {
      await Deno.remove(`${out}/${app}-linux-${arch.name}`, { recursive: true }).catch(() => {});
    }
  }
  const programs: Record<string, string> = {};
  if (args.portable) {
    const bundles = Object.fromEntries(
      await Promise.all(APPS.map(async (app) => [app, await bundleApp(app, { root: ROOT, workDir: work })])),
    );
    step("bundled svc-server and svc-agent", started);
    for (const arch of ARCHES) {
      const runtime = await portableRuntime(arch, {
        version: PORTABLE_RUNTIME_VERSION,
        cacheDir: `${out}/.cache`,
      });
      for (const app of APPS) {
        const dir = `${out}/${app}-linux-${arch.name}`;
        await assemblePortable(app, { dir, bundle: bundles[app], runtime, root: ROOT });
        programs[`${app}/${arch.name}`] = dir;
      }
    }
    step(
      `portable programs with Deno ${PORTABLE_RUNTIME_VERSION} for ${ARCHES.map((a) => a.name).join(", ")}`,
      started,
    );
  } else {
    for (const arch of ARCHES) {
      for (const app of APPS) {
        const dir = `${out}/${app}-linux-${arch.name}`;
        await compileApp(app, arch, { dir, root: ROOT, workDir: work });
        programs[`${app}/${arch.name}`] = dir;
      }
    }
    step("compiled programs", started);
  }

  const signer = await openSigner({ keyFile: Deno.env.get("SVC_REPO_SIGNING_KEY_FILE") });
  try {
    const agentPackages = await buildPackages("svc-agent", {
      programs,
      out: `${out}/packages`,
      root: ROOT,
      workDir: work,
    });
    // Every rpm is signed, not only the repository's copies: dnf checks package signatures (gpgcheck=1)
    // of whatever an operator installs, and rpmlint reports an unsigned package as an error.
    const sign = async (built: Array<{ format: string; file: string }>) => {
      for (const p of built) if (p.format === "rpm") await signRpm(p.file, signer);
    };
    await sign(agentPackages);
    step(`agent packages: ${agentPackages.length}`, started);
    const repo = `${out}/agent-repo`;
    const manifest = await assembleRepo({ packages: agentPackages, dir: repo, signer });
    step(`agent repository (signed: ${manifest.signed}, key: ${signer.label})`, started);
    const repoPackages = await buildAgentRepoPackages({
      repo,
      out: `${out}/packages`,
      root: ROOT,
      workDir: work,
    });
    await sign(repoPackages);
    step(`agent repository packages (svc-agent-repo): ${repoPackages.length}`, started);
    const serverPackages = await buildPackages("svc-server", {
      programs,
      out: `${out}/packages`,
      root: ROOT,
      workDir: work,
    });
    await sign(serverPackages);
    step(`server packages: ${serverPackages.length}`, started);
    await Deno.writeTextFile(
      `${out}/build.json`,
      JSON.stringify(
        {
          version: VERSION,
          form: args.portable ? "portable" : "compiled",
          runtime: args.portable ? PORTABLE_RUNTIME_VERSION : Deno.version.deno,
          arches: ARCHES.map((a) => a.name),
          programs: Object.fromEntries(
            Object.entries(programs).map(([k, v]) => [k, v.slice(out.length + 1)]),
          ),
          packages: [...agentPackages, ...repoPackages, ...serverPackages].map((p) =>
            p.file.slice(out.length + 1)
          ),
          signing_key: signer.label,
          seconds: Math.round((performance.now() - started) / 100) / 10,
        },
        null,
        2,
      ) + "\n",
    );
  } finally {
    await signer.close();
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
  step(`done: ${out}`, started);
  return 0;
}

if (import.meta.main) {
  try {
    Deno.exit(await main());
  } catch (err) {
    console.error(`build: ${(err as Error).message}`);
    Deno.exit(1);
  }
}
