/**
 * The Deno runtime of a target architecture for the portable build, taken from the npm registry
 * (`@deno/linux-x64-glibc`, `@deno/linux-arm64-glibc`): `npm pack` fetches the tarball, its SHA-512 is
 * checked against the integrity the registry publishes, and the one `deno` executable inside is kept in
 * a cache directory so later builds need no network.
 *
 * @module
 */
import type { ArchInfo } from "./targets.ts";
import { run } from "./exec.ts";

/** Returns the path of the cached `deno` executable for `arch`, fetching it when absent. */
export async function portableRuntime(
  arch: ArchInfo,
  options: { version: string; cacheDir: string },
): Promise<string> {
  const dir = `${options.cacheDir}/deno-${options.version}-${arch.name}`;
  const exe = `${dir}/deno`;
  if (await exists(exe)) return exe;
  const spec = `${arch.npmRuntime}@${options.version}`;
  const view = await run("npm", ["view", spec, "dist.integrity", "--json"], { quiet: true });
  const integrity = view.trim() ? JSON.parse(view) as string : "";
  if (!integrity.startsWith("sha512-")) {
    throw new Error(
      `the npm registry publishes no ${spec} (needed for the ${arch.name} runtime); pick a version ` +
        `published for every arch in packaging/targets.ts`,
    );
  }
  const tmp = await Deno.makeTempDir({ prefix: "svc-runtime-" });
  try {
    const packed = JSON.parse(
      await run("npm", ["pack", spec, "--json", "--pack-destination", tmp], {
        quiet: true,
      }),
    ) as Array<{ filename: string }>;
    const tgz = `${tmp}/${packed[0].filename}`;
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-512", await Deno.readFile(tgz)));
    const actual = `sha512-${btoa(String.fromCharCode(...digest))}`;
    if (actual !== integrity) {
      throw new Error(
        `${spec}: tarball SHA-512 ${actual} differs from the registry's ${integrity}; not used`,
      );
    }
    await run("tar", ["-xzf", tgz, "-C", tmp, "package/deno"]);
    await Deno.mkdir(dir, { recursive: true });
    await Deno.rename(`${tmp}/package/deno`, `${exe}.part`);
    await Deno.chmod(`${exe}.part`, 0o755);
    await Deno.writeTextFile(`${dir}/integrity`, `${spec} ${integrity}\n`);
    await Deno.rename(`${exe}.part`, exe);
    return exe;
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}
