/**
 * A real, signed Flatpak repository for tests, built with the real tools: a GPG key in a temp
 * GNUPGHOME, a tiny runtime exported with `flatpak build-export --runtime` (no runtime can be
 * downloaded here, so the test makes its own: a metadata file and one file under `usr`), an app made
 * with `flatpak build-init` / `build-finish` / `build-export` carrying AppStream data, and
 * `build-update-repo` signing the summary and generating the appstream branch. The repository is
 * served over HTTP on 127.0.0.1 by `Deno.serve`.
 */
import { mustRun } from "./command.ts";

/** Whether the tools to build a repository are installed; a reason when not. */
export async function flatpakToolsMissing(): Promise<string | undefined> {
  for (const tool of ["flatpak", "ostree", "gpg"]) {
    const found = await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" })
      .output();
    if (!found.success) return `${tool} is not installed (.ci/run installs flatpak, ostree and gnupg)`;
  }
  return undefined;
}

/** A built and served repository. */
export interface FlatpakTestRepo {
  /** Temp directory holding everything. */
  dir: string;
  /** Directory of the OSTree repository. */
  repoDir: string;
  /** `http://127.0.0.1:PORT/`. */
  url: string;
  /** The signing public key, base64 (the GPGKey form of a .flatpakrepo file). */
  gpgKeyBase64: string;
  appId: string;
  runtimeId: string;
  /** Exports a new commit of the app (its script prints `hello <version>`); returns the commit. */
  publish(version: number): Promise<string>;
  /** The commit of a ref in the repository. */
  commitOf(ref: string): Promise<string>;
  close(): Promise<void>;
}

async function run(cmd: string, args: string[], env: Record<string, string>): Promise<string> {
  return (await mustRun(cmd, args, { env })).stdout;
}

function appstream(appId: string, version: number): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<components version="0.8" origin="flatpak">
  <component type="desktop-application">
    <id>${appId}</id>
    <name>Hello svc</name>
    <summary>Prints a greeting for the svc tests</summary>
    <icon type="cached" width="64" height="64">${appId}.png</icon>
    <bundle type="flatpak">app/${appId}/x86_64/stable</bundle>
    <releases><release version="${version}.0" timestamp="${1700000000 + version}"/></releases>
  </component>
</components>
`;
}

/** Builds the repository with one app version and serves it. */
export async function buildFlatpakRepo(): Promise<FlatpakTestRepo> {
  const dir = await Deno.makeTempDir({ prefix: "svc-flatpak-repo-" });
  const gnupg = `${dir}/gnupg`;
  await Deno.mkdir(gnupg, { mode: 0o700 });
  const env = {
    GNUPGHOME: gnupg,
    // The builder's own installations, never the machine's.
    FLATPAK_USER_DIR: `${dir}/builder-user`,
    FLATPAK_SYSTEM_DIR: `${dir}/builder-system`,
  };
  // RSA: this machine's flatpak (GPGME) fails to re-export an ed25519 key when importing it into a remote.
  await run("gpg", [
    "--batch",
    "--passphrase",
    "",
    "--quick-gen-key",
    "svc test repo <repo@example.invalid>",
    "rsa2048",
    "sign",
    "never",
  ], env);
  const listing = await run("gpg", ["--list-keys", "--with-colons"], env);
  const keyId = listing.split("\n").find((l) => l.startsWith("fpr:"))!.split(":")[9];
  const exported = await new Deno.Command("gpg", { args: ["--export", keyId], env, stdout: "piped" })
    .output();
  const gpgKeyBase64 = btoa(String.fromCharCode(...exported.stdout));
  const sign = [`--gpg-sign=${keyId}`, `--gpg-homedir=${gnupg}`];
  const repoDir = `${dir}/repo`;
  const runtimeId = "org.svc.TestPlatform";
  const appId = "org.svc.Hello";

  const rt = `${dir}/runtime`;
  for (const sub of ["files/lib", "usr/lib"]) await Deno.mkdir(`${rt}/${sub}`, { recursive: true });
  await Deno.writeTextFile(`${rt}/usr/lib/svc-runtime`, "tiny runtime for the svc tests\n");
  await Deno.writeTextFile(`${rt}/files/lib/svc-runtime`, "tiny runtime for the svc tests\n");
  await Deno.writeTextFile(
    `${rt}/metadata`,
    `[Runtime]\nname=${runtimeId}\nruntime=${runtimeId}/x86_64/1\nsdk=${runtimeId}/x86_64/1\n`,
  );
  await run("flatpak", ["build-export", "--runtime", ...sign, repoDir, rt, "1"], env);
  await run("flatpak", ["build-update-repo", ...sign, repoDir], env);
  // build-init needs the SDK installed: install the runtime into the builder's own user installation.
  await run("flatpak", ["--user", "remote-add", "--no-gpg-verify", "build", `file://${repoDir}`], env);
  await run("flatpak", [
    "--user",
    "install",
    "-y",
    "--noninteractive",
    "build",
    `runtime/${runtimeId}/x86_64/1`,
  ], env);

  async function publish(version: number): Promise<string> {
    const app = `${dir}/app-${version}`;
    await run("flatpak", ["build-init", app, appId, runtimeId, runtimeId, "1"], env);
    await Deno.mkdir(`${app}/files/bin`, { recursive: true });
    await Deno.writeTextFile(`${app}/files/bin/hello`, `#!/bin/sh\necho hello ${version}\n`, { mode: 0o755 });
    const xmls = `${app}/files/share/app-info/xmls`;
    await Deno.mkdir(xmls, { recursive: true });
    const gz = new Blob([appstream(appId, version)]).stream().pipeThrough(new CompressionStream("gzip"));
    await Deno.writeFile(`${xmls}/${appId}.xml.gz`, new Uint8Array(await new Response(gz).arrayBuffer()));
    await run("flatpak", ["build-finish", "--command=hello", app], env);
    await run("flatpak", ["build-export", ...sign, repoDir, app, "stable"], env);
    await run("flatpak", ["build-update-repo", ...sign, repoDir], env);
    return await commitOf(`app/${appId}/x86_64/stable`);
  }

  async function commitOf(ref: string): Promise<string> {
    return (await run("ostree", [`--repo=${repoDir}`, "rev-parse", ref], env)).trim();
  }

  await publish(1);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    const path = decodeURIComponent(new URL(request.url).pathname);
    if (path.split("/").includes("..")) return new Response("bad path", { status: 400 });
    try {
      const file = await Deno.open(`${repoDir}${path}`, { read: true });
      return new Response(file.readable);
    } catch {
      return new Response("not found", { status: 404 });
    }
  });
  return {
    dir,
    repoDir,
    url: `http://127.0.0.1:${server.addr.port}/`,
    gpgKeyBase64,
    appId,
    runtimeId,
    publish,
    commitOf,
    async close() {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    },
  };
}
