/**
 * svc installable end to end, on the artifacts of `deno task build --portable` in `dist/` (CI builds them
 * once before the suite and sets SVC_REQUIRE_PACKAGES=1, so a missing build fails there instead of
 * skipping), with the real package tools and throwaway roots only:
 *
 * - the svc-server deb installs into a throwaway root with `dpkg --root` (maintainer scripts run there:
 *   the `svc` user is created, systemd is reloaded through the root's own systemctl recorder), and the
 *   installed `svc-server` starts on a fresh data dir, answers /api/v1/version and serves its repository;
 * - manifest checksums match the files; the download counter moves for a package GET, not an index GET;
 * - apt-get (own sources, state and cache dirs) verifies InRelease against repo-key.asc and fetches the
 *   agent; a tampered Packages or InRelease is refused; dnf --installroot with repo_gpgcheck=1 installs the
 *   agent rpm, and a tampered repomd.xml is refused;
 * - the agent deb and rpm install, upgrade (a changed /etc/svc/agent.yaml survives), remove (unit stopped
 *   and disabled) and purge (config and data gone) with their scripts in throwaway roots;
 * - the apk and Arch packages read back: checksums, datahash, .MTREE digests, pacman's own reader;
 * - the wizard's Debian script runs for real in a private copy-on-write view of this machine (an overlay
 *   of / in a private mount namespace): CA trust, signed apt repository, apt-get install, enrollment with a
 *   fresh token; the installed agent then streams and applies a Firefox policy into a temporary root.
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { freePort, type ServerProcess } from "../helpers/process.ts";
import { Api, eventually, type Json } from "../helpers/agent_process.ts";
import { deployScript, deploySteps } from "../../web/src/deploy_script.ts";
import { createAgentRepo } from "../../server/http/agent_repo.ts";
import { buildPackages } from "../../packaging/packages.ts";
import { VERSION } from "../../shared/version.ts";
import { followOutput } from "../helpers/command.ts";
import { storySteps } from "../helpers/steps.ts";

const DIST = new URL("../../dist/", import.meta.url).pathname;
const REQUIRED = Deno.env.get("SVC_REQUIRE_PACKAGES") === "1";
const HOST_ARCH = Deno.build.arch === "x86_64" ? "amd64" : "arm64";
const RPM_ARCH = HOST_ARCH === "amd64" ? "x86_64" : "aarch64";
const TOOLS = [
  "dpkg",
  "dpkg-deb",
  "apt-get",
  "rpm",
  "dnf",
  "gpgv",
  "unshare",
  "chroot",
  "zstd",
  "pacman",
  "python3",
];

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

async function which(tool: string): Promise<boolean> {
  const out = await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" }).output();
  return out.success;
}

/** Why the test cannot run here, or undefined. */
async function missing(): Promise<string | undefined> {
  if (!await exists(`${DIST}agent-repo/manifest.json`)) {
    return "dist/agent-repo is absent: run `deno task build --portable` first (CI does)";
  }
  const absent = [];
  for (const t of TOOLS) if (!await which(t)) absent.push(t);
  if (!await exists("/bin/busybox")) absent.push("busybox (package busybox-static)");
  if (absent.length) return `missing tools: ${absent.join(", ")} (.ci/run installs them)`;
  if (Deno.uid() !== 0) return "needs root for dpkg --root, rpm --root, chroot and mount namespaces";
  return undefined;
}

const reason = await missing();
if (reason && REQUIRED) throw new Error(`install test cannot run but SVC_REQUIRE_PACKAGES=1: ${reason}`);
if (reason) console.error(`install_test: skipped: ${reason}`);

interface Cmd {
  code: number;
  stdout: string;
  stderr: string;
}

async function sh(
  cmd: string,
  args: string[],
  options: { env?: Record<string, string>; cwd?: string } = {},
): Promise<Cmd> {
  const out = await new Deno.Command(cmd, {
    args,
    env: options.env,
    cwd: options.cwd,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

async function ok(
  cmd: string,
  args: string[],
  options: { env?: Record<string, string>; cwd?: string } = {},
): Promise<string> {
  const r = await sh(cmd, args, options);
  assert.equal(r.code, 0, `${cmd} ${args.join(" ")} failed:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

async function sha256File(path: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", await Deno.readFile(path)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

function pkgFile(manifest: Json, format: string, arch: string): string {
  const p = manifest.packages.find((x: Json) => x.format === format && x.arch === arch);
  assert.ok(p, `manifest lists a ${format} package for ${arch}`);
  return p.path;
}

/**
 * A throwaway root in which maintainer scripts can run (dpkg and rpm chroot into it): busybox as the
 * shell and tools, an /etc/passwd to add the svc user to, a dpkg database, and a `systemctl` that records
 * its arguments (systemd itself does not run in a chroot). /run/systemd/system says "systemd is running".
 */
async function throwawayRoot(dir: string): Promise<string> {
  for (
    const d of [
      "bin",
      "sbin",
      "usr/bin",
      "usr/sbin",
      "etc",
      "run/systemd/system",
      "var/log",
      "tmp",
      "var/lib/dpkg/info",
      "var/lib/dpkg/updates",
    ]
  ) {
    await Deno.mkdir(`${dir}/${d}`, { recursive: true });
  }
  await Deno.copyFile("/bin/busybox", `${dir}/bin/busybox`);
  await Deno.chmod(`${dir}/bin/busybox`, 0o755);
  for (
    const applet of [
      "sh",
      "id",
      "grep",
      "install",
      "chgrp",
      "chmod",
      "rm",
      "rmdir",
      "cat",
      "mkdir",
      "ls",
      "echo",
      "addgroup",
      "adduser",
      "readlink",
    ]
  ) {
    await Deno.symlink("busybox", `${dir}/bin/${applet}`);
  }
  // shadow's real useradd/groupadd (the server package's postinst creates its user with them), with the
  // shared libraries they load.
  for (const tool of ["/usr/sbin/useradd", "/usr/sbin/groupadd"]) await copyWithLibraries(tool, dir);
  await Deno.mkdir(`${dir}/dev`, { recursive: true });
  await ok("mknod", ["-m", "666", `${dir}/dev/null`, "c", "1", "3"]);
  await Deno.writeTextFile(`${dir}/etc/gshadow`, "root:*::\n");
  await Deno.writeTextFile(`${dir}/etc/passwd`, "root:x:0:0:root:/root:/bin/sh\n");
  await Deno.writeTextFile(`${dir}/etc/group`, "root:x:0:\n");
  await Deno.writeTextFile(`${dir}/etc/shadow`, "root:*:19000:0:99999:7:::\n");
  await Deno.writeTextFile(`${dir}/var/lib/dpkg/status`, "");
  await Deno.writeTextFile(`${dir}/var/lib/dpkg/available`, "");
  await Deno.writeTextFile(`${dir}/usr/bin/systemctl`, '#!/bin/sh\necho "$*" >> /var/log/systemctl.calls\n');
  await Deno.chmod(`${dir}/usr/bin/systemctl`, 0o755);
  return dir;
}

/** Copies an executable and every shared library `ldd` names into the same paths under `root`. */
async function copyWithLibraries(exe: string, root: string): Promise<void> {
  const libs = (await ok("ldd", [exe])).split("\n").map((l) => /(\/\S+) \(0x/.exec(l)?.[1]).filter((x) => x);
  for (const file of [exe, ...libs as string[]]) {
    const real = await Deno.realPath(file);
    await Deno.mkdir(`${root}${file.slice(0, file.lastIndexOf("/"))}`, { recursive: true });
    if (!await exists(`${root}${file}`)) await Deno.copyFile(real, `${root}${file}`);
    await Deno.chmod(`${root}${file}`, 0o755);
  }
}

/** Stops the gpg-agents dnf started for its repository keyrings under `dir`. */
async function stopGpgAgents(dir: string): Promise<void> {
  const homes = (await sh("find", [dir, "-type", "d", "-name", "pubring"])).stdout.split("\n").filter(
    Boolean,
  );
  for (const home of homes) await sh("gpgconf", ["--homedir", home, "--kill", "all"]);
}

/**
 * `systemd-analyze verify` of an installed unit (with ExecStart pointed at /bin/true, the program being
 * in a throwaway root): every directive must be one systemd knows, so the hardening is real.
 */
async function verifyUnit(path: string): Promise<void> {
  if (!await which("systemd-analyze")) return;
  const dir = await Deno.makeTempDir({ prefix: "svc-unit-" });
  try {
    const name = path.slice(path.lastIndexOf("/") + 1);
    const text = (await Deno.readTextFile(path)).replace(/^ExecStart=\S+/m, "ExecStart=/bin/true");
    await Deno.writeTextFile(`${dir}/${name}`, text);
    const r = await sh("systemd-analyze", ["verify", `${dir}/${name}`]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr.trim(), "", `systemd-analyze verify ${name}:\n${r.stderr}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function systemctlCalls(root: string): Promise<string[]> {
  const text = await Deno.readTextFile(`${root}/var/log/systemctl.calls`).catch(() => "");
  const calls = text.split("\n").filter(Boolean);
  await Deno.remove(`${root}/var/log/systemctl.calls`).catch(() => {});
  return calls;
}

/** dpkg on a throwaway root; its PATH is the root's (dpkg checks it for its helpers). */
function dpkg(root: string, args: string[]) {
  return sh("dpkg", [`--root=${root}`, "--force-depends", "--force-not-root", ...args], {
    env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
  });
}

async function mode(path: string): Promise<number> {
  return (await Deno.stat(path)).mode! & 0o7777;
}

/** Downloads counted by the server's metrics listener for `format`/`arch`. */
async function downloads(metricsPort: number, format: string, arch: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text.split("\n").find((l) =>
    l.startsWith("svc_agent_package_downloads_total{") && l.includes(`format="${format}"`) &&
    l.includes(`arch="${arch}"`)
  );
  assert.ok(line, `no download series for ${format}/${arch}`);
  return Number(line.split(" ").pop());
}

/** A throwaway HTTP server for a tampered copy of a repository (served by the real repository handler). */
function serveCopy(dir: string): { url: string; close(): Promise<void> } {
  const repo = createAgentRepo({ dir, serverVersion: VERSION });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => repo.handle(req));
  return { url: `http://127.0.0.1:${server.addr.port}/agent`, close: () => server.shutdown() };
}

/** A hard-linked copy of `src` (files replaced later are unlinked first, so the original stays intact). */
async function linkCopy(src: string, dst: string): Promise<void> {
  await ok("cp", ["-al", src, dst]);
}

async function replaceText(path: string, edit: (text: string) => string): Promise<void> {
  const text = await Deno.readTextFile(path);
  await Deno.remove(path);
  await Deno.writeTextFile(path, edit(text));
}

/** apt-get with its own configuration, sources, state and cache under `dir`. */
async function aptGet(dir: string, sources: string, args: string[], extra: string[] = []): Promise<Cmd> {
  for (
    const d of [
      "etc/sources.list.d",
      "etc/trusted.gpg.d",
      "etc/preferences.d",
      "state/lists/partial",
      "cache/archives/partial",
    ]
  ) {
    await Deno.mkdir(`${dir}/${d}`, { recursive: true });
  }
  await Deno.writeTextFile(`${dir}/etc/sources.list.d/svc-agent.sources`, sources);
  await Deno.writeTextFile(`${dir}/state/status`, "");
  return await sh("apt-get", [
    "-o",
    `Dir::Etc=${dir}/etc`,
    "-o",
    "Dir::Etc::SourceList=/dev/null",
    "-o",
    `Dir::Etc::SourceParts=${dir}/etc/sources.list.d`,
    "-o",
    `Dir::Etc::TrustedParts=${dir}/etc/trusted.gpg.d`,
    "-o",
    `Dir::State=${dir}/state`,
    "-o",
    `Dir::State::status=${dir}/state/status`,
    "-o",
    `Dir::Cache=${dir}/cache`,
    "-o",
    "Debug::NoLocking=1",
    "-o",
    "APT::Sandbox::User=root",
    "-o",
    `APT::Architecture=${HOST_ARCH}`,
    ...extra,
    ...args,
  ], { cwd: dir });
}

/** Starts the installed svc-server of `root` with a fresh data dir. */
async function startInstalledServer(
  root: string,
  base: string,
): Promise<ServerProcess & { child: Deno.ChildProcess }> {
  const dataDir = `${base}/server-data`;
  await Deno.mkdir(dataDir, { recursive: true });
  const webPort = freePort();
  const policyPort = freePort();
  const metricsPort = freePort();
  const configPath = `${base}/server.yaml`;
  await Deno.writeTextFile(
    configPath,
    stringify({
      server: {
        enrollment_port: webPort,
        policy_port: policyPort,
        data_dir: dataDir,
        hostnames: ["localhost"],
      },
      metrics: { listen_addr: `127.0.0.1:${metricsPort}` },
      agent_repo: { dir: `${root}/usr/share/svc/agent-repo` },
    }),
  );
  const child = new Deno.Command(`${root}/usr/bin/svc-server`, {
    args: ["--config", configPath],
    env: { NO_COLOR: "1", HOME: dataDir },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const followed = followOutput(child);
  const pumps = followed.closed;
  let exited: number | undefined;
  const status = child.status.then((s) => exited = s.code);
  const proc = {
    child,
    webPort,
    policyPort,
    metricsPort,
    dataDir,
    configPath,
    baseUrl: `https://localhost:${webPort}`,
    output: followed.all,
    exitCode: () => exited,
    adminPassword: async () => (await Deno.readTextFile(`${dataDir}/initial_admin_password`)).trim(),
    async stop() {
      if (exited === undefined) child.kill("SIGTERM");
      await status;
      await pumps;
      return exited!;
    },
  };
  await eventually(
    async () => {
      if (exited !== undefined) throw new Error(`installed svc-server exited ${exited}:\n${followed.all()}`);
      const client = Deno.createHttpClient({
        caCerts: [await Deno.readTextFile(`${dataDir}/pki/ca/ca.crt`)],
      });
      try {
        const res = await fetch(`${proc.baseUrl}/api/v1/version`, {
          client,
          signal: AbortSignal.timeout(2000),
        });
        return res.ok ? await res.json() : undefined;
      } finally {
        client.close();
      }
    },
    120_000,
    "the installed svc-server",
    followed.all,
  );
  return proc as unknown as ServerProcess & { child: Deno.ChildProcess };
}

Deno.test({
  name: "packages: install, serve, verify, upgrade, remove; the wizard's script enrolls an installed agent",
  ignore: reason !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const base = await Deno.makeTempDir({ prefix: "svc-install-" });
    const manifest = JSON.parse(await Deno.readTextFile(`${DIST}agent-repo/manifest.json`));
    const build = JSON.parse(await Deno.readTextFile(`${DIST}build.json`));
    const packages = (name: string) =>
      build.packages.map((p: string) => `${DIST}${p}`).filter((p: string) => p.includes(name));
    let server: (ServerProcess & { child: Deno.ChildProcess }) | undefined;
    let api: Api | undefined;
    const step = storySteps(t);
    const serverRoot = `${base}/server-root`;
    try {
      await step(
        "svc-server deb installs with its scripts; the installed server answers its version",
        async () => {
          await throwawayRoot(serverRoot);
          const deb = packages(`svc-server_${VERSION}-1_${HOST_ARCH}.deb`)[0];
          let r = await dpkg(serverRoot, ["-i", deb]);
          assert.equal(r.code, 0, r.stdout + r.stderr);
          assert.match(
            await Deno.readTextFile(`${serverRoot}/etc/passwd`),
            /^svc:x:\d+:\d+:.*:\/var\/lib\/svc:/m,
          );
          const gid = /^svc:x:(\d+):/m.exec(await Deno.readTextFile(`${serverRoot}/etc/group`))![1];
          const conf = await Deno.stat(`${serverRoot}/etc/svc/server.yaml`);
          assert.equal(conf.mode! & 0o777, 0o640);
          assert.equal(conf.gid, Number(gid));
          assert.deepEqual(await systemctlCalls(serverRoot), ["daemon-reload"]);
          await verifyUnit(`${serverRoot}/lib/systemd/system/svc-server.service`);
          const unit = await Deno.readTextFile(`${serverRoot}/lib/systemd/system/svc-server.service`);
          for (
            const line of ["User=svc", "NoNewPrivileges=yes", "ProtectSystem=strict", "StateDirectory=svc"]
          ) {
            assert.match(unit, new RegExp(`^${line}$`, "m"));
          }
          // The server package holds the server only; the agent repository is its own package.
          assert.ok(
            !await exists(`${serverRoot}/usr/share/svc/agent-repo`),
            "svc-server carries no repository",
          );
          const control = await ok("dpkg-deb", ["--field", deb, "Recommends", "Installed-Size"]);
          assert.match(control, /^Recommends: systemd, svc-agent-repo$/m);
          const installedKiB = Number(/^Installed-Size: (\d+)$/m.exec(control)![1]);
          assert.ok(
            installedKiB < 160 * 1024,
            `svc-server installs ${installedKiB} KiB: the server, not the agents`,
          );
          assert.ok((await Deno.stat(deb)).size <= 60 * 1024 * 1024, `${deb} is at most 60 MB`);
          server = await startInstalledServer(serverRoot, base);
          const client = Deno.createHttpClient({
            caCerts: [await Deno.readTextFile(`${server.dataDir}/pki/ca/ca.crt`)],
          });
          const version = await (await fetch(`${server.baseUrl}/api/v1/version`, { client })).json();
          assert.deepEqual(version, { version: VERSION });
          api = await Api.login(server);
          const none = await api.call("GET", "/api/v1/agent-repo");
          assert.equal(none.enabled, false, "no repository before svc-agent-repo is installed");
          assert.match(none.reason, /install the svc-agent-repo package/);
          const gone = await fetch(`${server.baseUrl}/agent/repo-key.asc`, { client });
          await gone.body?.cancel();
          assert.equal(gone.status, 404);
          client.close();

          // svc-agent-repo installs the repository where the server looks; it is served without a restart.
          const repoDeb = packages(`svc-agent-repo_${VERSION}-1_all.deb`)[0];
          r = await dpkg(serverRoot, ["-i", repoDeb]);
          assert.equal(r.code, 0, r.stdout + r.stderr);
          assert.equal(
            await sha256File(`${serverRoot}/usr/share/svc/agent-repo/manifest.json`),
            await sha256File(`${DIST}agent-repo/manifest.json`),
          );
          const status = await eventually(
            async () => {
              const s = await api!.call("GET", "/api/v1/agent-repo");
              return s.enabled ? s : undefined;
            },
            120_000,
            "the installed repository to be served",
          );
          assert.equal(status.enabled, true);
          assert.equal(status.version, VERSION);
          assert.equal(status.version_mismatch, false);
          assert.equal(status.signed, true);
          assert.deepEqual(status.arches.sort(), ["amd64", "arm64"]);
        },
      );

      await step("manifest checksums match; a package GET counts, an index GET and HEAD do not", async () => {
        assert.equal(manifest.signed, true);
        assert.deepEqual(manifest.arches, ["amd64", "arm64"]);
        for (const f of manifest.files) {
          const path = `${serverRoot}/usr/share/svc/agent-repo/${f.path}`;
          assert.equal((await Deno.stat(path)).size, f.size, f.path);
          assert.equal(await sha256File(path), f.sha256, f.path);
        }
        const client = Deno.createHttpClient({
          caCerts: [await Deno.readTextFile(`${server!.dataDir}/pki/ca/ca.crt`)],
        });
        try {
          const apk = pkgFile(manifest, "apk", "arm64");
          const before = await downloads(server!.metricsPort, "apk", "arm64");
          const debBefore = await downloads(server!.metricsPort, "deb", HOST_ARCH);
          const index = await fetch(
            `${server!.baseUrl}/agent/deb/dists/stable/main/binary-${HOST_ARCH}/Packages`,
            { client },
          );
          assert.match(await index.text(), /^Package: svc-agent$/m);
          const head = await fetch(`${server!.baseUrl}/agent/${apk}`, { method: "HEAD", client });
          assert.equal(head.status, 200);
          assert.equal(await downloads(server!.metricsPort, "apk", "arm64"), before);
          const res = await fetch(`${server!.baseUrl}/agent/${apk}`, { client });
          const body = new Uint8Array(await res.arrayBuffer());
          const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", body));
          assert.equal(
            Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""),
            manifest.files.find((f: Json) => f.path === apk).sha256,
          );
          assert.equal(await downloads(server!.metricsPort, "apk", "arm64"), before + 1);
          assert.equal(await downloads(server!.metricsPort, "deb", HOST_ARCH), debBefore);
          assert.equal(
            (await fetch(`${server!.baseUrl}/agent/manifest.json`, { method: "POST", client })).status,
            405,
          );
        } finally {
          client.close();
        }
      });

      const repoKey = `${base}/repo-key.asc`;
      const caFile = `${base}/ca.crt`;
      await step(
        "apt-get verifies InRelease against repo-key.asc and fetches svc-agent; tampering is refused",
        async () => {
          await Deno.writeTextFile(repoKey, await Deno.readTextFile(`${DIST}agent-repo/repo-key.asc`));
          await Deno.copyFile(`${server!.dataDir}/pki/ca/ca.crt`, caFile);
          const sources = (uri: string) =>
            `Types: deb\nURIs: ${uri}/deb\nSuites: stable\nComponents: main\nArchitectures: ${HOST_ARCH}\nSigned-By: ${repoKey}\n`;
          const apt = `${base}/apt`;
          const ca = ["-o", `Acquire::https::CaInfo=${caFile}`];
          const before = await downloads(server!.metricsPort, "deb", HOST_ARCH);
          await ok("true", []);
          let r = await aptGet(apt, sources(`${server!.baseUrl}/agent`), ["update"], ca);
          assert.equal(r.code, 0, r.stdout + r.stderr);
          assert.doesNotMatch(r.stderr, /^(W|E):/m, r.stderr);
          r = await aptGet(apt, sources(`${server!.baseUrl}/agent`), ["download", "svc-agent"], ca);
          assert.equal(r.code, 0, r.stdout + r.stderr);
          const fetched = `${apt}/svc-agent_${VERSION}-1_${HOST_ARCH}.deb`;
          assert.equal(
            await sha256File(fetched),
            await sha256File(`${DIST}agent-repo/${pkgFile(manifest, "deb", HOST_ARCH)}`),
          );
          assert.equal(await downloads(server!.metricsPort, "deb", HOST_ARCH), before + 1);

          // A Packages index changed after signing: the hash in InRelease no longer matches.
          const tampered = `${base}/tampered-packages`;
          await linkCopy(`${DIST}agent-repo`, tampered);
          await replaceText(
            `${tampered}/deb/dists/stable/main/binary-${HOST_ARCH}/Packages`,
            (t) => t.replace(/^Version: .*$/m, "Version: 99.0-1"),
          );
          await Deno.remove(`${tampered}/deb/dists/stable/main/binary-${HOST_ARCH}/Packages.gz`);
          let copy = serveCopy(tampered);
          r = await aptGet(`${base}/apt-tampered-1`, sources(copy.url), ["update"]);
          await copy.close();
          assert.notEqual(r.code, 0, "apt-get must refuse a tampered Packages");
          assert.match(r.stdout + r.stderr, /Hash Sum mismatch|unexpected size|File has unexpected size/i);
          // InRelease changed after signing: its signature no longer verifies.
          const tampered2 = `${base}/tampered-inrelease`;
          await linkCopy(`${DIST}agent-repo`, tampered2);
          await replaceText(
            `${tampered2}/deb/dists/stable/InRelease`,
            (t) => t.replace("Suite: stable", "Suite: stabl3"),
          );
          copy = serveCopy(tampered2);
          r = await aptGet(`${base}/apt-tampered-2`, sources(copy.url), ["update"]);
          await copy.close();
          assert.match(
            r.stdout + r.stderr,
            /BADSIG|not signed|signatures? (were|was) invalid|NO_PUBKEY|is not signed/i,
          );
          assert.ok(
            !await exists(
              `${base}/apt-tampered-2/state/lists/127.0.0.1:${
                new URL(copy.url).port
              }_agent_deb_dists_stable_InRelease`,
            ),
          );
        },
      );

      await step(
        "dnf --installroot with repo_gpgcheck=1 installs svc-agent; a tampered repomd.xml is refused",
        async () => {
          const steps = deploySteps({
            origin: server!.baseUrl,
            family: "fedora",
            arch: HOST_ARCH,
            caPem: await Deno.readTextFile(caFile),
            repoKey: await Deno.readTextFile(repoKey),
            packages: manifest.packages,
          });
          const repoText = /<<'SVC_REPO'\n([\s\S]*?)\nSVC_REPO/.exec(
            steps.find((s) => s.id === "repository")!.script,
          )![1];
          assert.match(repoText, /^repo_gpgcheck=1$/m);
          const dnf = async (dir: string, text: string, args: string[]) => {
            await Deno.mkdir(`${dir}/repos`, { recursive: true });
            await Deno.writeTextFile(
              `${dir}/repos/svc-agent.repo`,
              text.replace("file:///etc/pki/rpm-gpg/RPM-GPG-KEY-svc-agent", `file://${repoKey}`) +
                `\nsslcacert=${caFile}\n`,
            );
            return await sh("dnf", [
              "-y",
              `--installroot=${dir}/root`,
              "--releasever=1",
              `--setopt=reposdir=${dir}/repos`,
              `--setopt=cachedir=${dir}/cache`,
              "--setopt=install_weak_deps=False",
              "--setopt=skip_if_unavailable=False",
              `--forcearch=${RPM_ARCH}`,
              ...args,
            ]);
          };
          const r = await dnf(`${base}/dnf`, repoText, ["install", "svc-agent"]);
          assert.equal(r.code, 0, r.stdout + r.stderr);
          const root = `${base}/dnf/root`;
          assert.equal(await mode(`${root}/etc/svc/agent.yaml`), 0o600);
          assert.equal(await mode(`${root}/var/lib/svc-agent`), 0o750);
          assert.match(
            await ok(`${root}/usr/bin/svc-agent`, ["--version"]),
            new RegExp(`svc-agent ${VERSION.replaceAll(".", "\\.")}`),
          );

          const tampered = `${base}/tampered-repomd`;
          await linkCopy(`${DIST}agent-repo`, tampered);
          await replaceText(
            `${tampered}/rpm/repodata/repomd.xml`,
            (t) => t.replace("<revision>", "<revision>1"),
          );
          const copy = serveCopy(tampered);
          const bad = await dnf(
            `${base}/dnf-tampered`,
            repoText.replace(`${server!.baseUrl}/agent`, copy.url),
            [
              "makecache",
            ],
          );
          await copy.close();
          await stopGpgAgents(base);
          assert.notEqual(
            bad.code,
            0,
            `dnf must refuse a repomd.xml whose signature does not verify:\n${bad.stdout}${bad.stderr}`,
          );
          assert.match(
            bad.stdout + bad.stderr,
            /repomd\.xml GPG signature verification error|signature|Bad GPG/i,
          );
        },
      );

      await step("agent deb: scripts, modes, upgrade keeps a changed agent.yaml, remove, purge", async () => {
        const root = await throwawayRoot(`${base}/deb-root`);
        const deb = packages(`svc-agent_${VERSION}-1_${HOST_ARCH}.deb`)[0];
        let r = await dpkg(root, ["-i", deb]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.deepEqual(await systemctlCalls(root), ["daemon-reload"]);
        assert.equal(await mode(`${root}/etc/svc/agent.yaml`), 0o600);
        assert.equal(await mode(`${root}/var/lib/svc-agent`), 0o750);
        assert.match(
          await Deno.readTextFile(`${root}/etc/svc/agent.yaml`),
          /^ {2}insecure_skip_verify: true$/m,
        );
        await verifyUnit(`${root}/lib/systemd/system/svc-agent.service`);
        const unit = await Deno.readTextFile(`${root}/lib/systemd/system/svc-agent.service`);
        for (const line of ["User=root", "Restart=on-failure", "RestartSec=30"]) {
          assert.match(unit, new RegExp(`^${line}$`, "m"));
        }
        assert.match(
          await ok(`${root}/usr/bin/svc-agent`, ["--version"]),
          new RegExp(VERSION.replaceAll(".", "\\.")),
        );
        // The administrator edits the config; release 2 of the same version upgrades over it.
        await replaceText(
          `${root}/etc/svc/agent.yaml`,
          (t) => t.replace("address: localhost", "address: svc.example.test"),
        );
        await Deno.chmod(`${root}/etc/svc/agent.yaml`, 0o600);
        const work = await Deno.makeTempDir({ dir: base });
        const [next] = (await buildPackages("svc-agent", {
          programs: { [`svc-agent/${HOST_ARCH}`]: `${DIST}svc-agent-linux-${HOST_ARCH}` },
          out: `${base}/release2`,
          root: new URL("../../", import.meta.url).pathname,
          workDir: work,
          release: "2",
          formats: ["deb", "rpm"],
          arches: [HOST_ARCH],
        })).filter((p) => p.format === "deb");
        // Unattended, as apt runs upgrades: the administrator's version of a changed conffile is kept.
        r = await dpkg(root, ["--force-confdef", "--force-confold", "-i", next.file]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.match(await Deno.readTextFile(`${root}/etc/svc/agent.yaml`), /address: svc\.example\.test/);
        assert.match(await ok("dpkg-query", [`--root=${root}`, "-W", "-f=${Version}", "svc-agent"]), /-2$/);
        await systemctlCalls(root);
        await Deno.writeTextFile(`${root}/var/lib/svc-agent/agent.crt`, "enrolled");
        r = await dpkg(root, ["--remove", "svc-agent"]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.deepEqual(await systemctlCalls(root), [
          "stop svc-agent.service",
          "disable svc-agent.service",
          "daemon-reload",
        ]);
        assert.ok(!await exists(`${root}/usr/bin/svc-agent`));
        assert.ok(await exists(`${root}/etc/svc/agent.yaml`), "remove keeps the configuration");
        assert.ok(await exists(`${root}/var/lib/svc-agent/agent.crt`), "remove keeps the data");
        r = await dpkg(root, ["--purge", "svc-agent"]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.ok(!await exists(`${root}/etc/svc/agent.yaml`), "purge removes the configuration");
        assert.ok(!await exists(`${root}/var/lib/svc-agent`), "purge removes the data");
        // rpm: the same package life with rpm's own database in another throwaway root.
        const rroot = await throwawayRoot(`${base}/rpm-root`);
        const rpm1 = packages(`svc-agent-${VERSION}-1.${RPM_ARCH}.rpm`)[0];
        const rpm2 = (await Array.fromAsync(Deno.readDir(`${base}/release2`))).find((e) =>
          e.name.endsWith(`.${RPM_ARCH}.rpm`)
        )!;
        await ok("rpm", [`--root=${rroot}`, "--initdb"]);
        await ok("rpm", [`--root=${rroot}`, "-i", "--nodeps", rpm1]);
        assert.deepEqual(await systemctlCalls(rroot), ["daemon-reload"]);
        assert.equal(await mode(`${rroot}/etc/svc/agent.yaml`), 0o600);
        await replaceText(
          `${rroot}/etc/svc/agent.yaml`,
          (t) => t.replace("address: localhost", "address: rpm.example.test"),
        );
        await ok("rpm", [`--root=${rroot}`, "-U", "--nodeps", `${base}/release2/${rpm2.name}`]);
        assert.match(await Deno.readTextFile(`${rroot}/etc/svc/agent.yaml`), /address: rpm\.example\.test/);
        assert.ok(
          !(await systemctlCalls(rroot)).some((c) => c.startsWith("stop")),
          "an upgrade does not stop the agent",
        );
        await ok("rpm", [`--root=${rroot}`, "-e", "svc-agent"]);
        assert.deepEqual(await systemctlCalls(rroot), [
          "stop svc-agent.service",
          "disable svc-agent.service",
          "daemon-reload",
        ]);
        assert.ok(!await exists(`${rroot}/usr/bin/svc-agent`));
      });

      await step(
        "svc-server rpm: %pre creates the svc user, the config is root:svc 0640, erase stops it",
        async () => {
          const root = await throwawayRoot(`${base}/server-rpm-root`);
          const rpmFile = packages(`svc-server-${VERSION}-1.${RPM_ARCH}.rpm`)[0];
          await ok("rpm", [`--root=${root}`, "--initdb"]);
          await ok("rpm", [`--root=${root}`, "-i", "--nodeps", rpmFile]);
          assert.match(await Deno.readTextFile(`${root}/etc/passwd`), /^svc:x:\d+:\d+:.*:\/var\/lib\/svc:/m);
          const gid = /^svc:x:(\d+):/m.exec(await Deno.readTextFile(`${root}/etc/group`))![1];
          const conf = await Deno.stat(`${root}/etc/svc/server.yaml`);
          assert.equal(conf.mode! & 0o777, 0o640);
          assert.equal(conf.gid, Number(gid));
          assert.equal(await mode(`${root}/var/lib/svc`), 0o700);
          assert.deepEqual(await systemctlCalls(root), ["daemon-reload"]);
          assert.match(
            await ok(`${root}/usr/bin/svc-server`, ["--version"]),
            new RegExp(VERSION.replaceAll(".", "\\.")),
          );
          assert.ok(!await exists(`${root}/usr/share/svc/agent-repo`), "svc-server carries no repository");
          assert.match(await ok("rpm", ["-qp", "--recommends", rpmFile]), /^svc-agent-repo$/m);
          const repoRpm = packages(`svc-agent-repo-${VERSION}-1.noarch.rpm`)[0];
          await ok("rpm", [`--root=${root}`, "-i", "--nodeps", repoRpm]);
          assert.equal(
            await sha256File(`${root}/usr/share/svc/agent-repo/manifest.json`),
            await sha256File(`${DIST}agent-repo/manifest.json`),
          );
          await ok("rpm", [`--root=${root}`, "-e", "svc-agent-repo"]);
          assert.ok(!await exists(`${root}/usr/share/svc/agent-repo/manifest.json`));
          await ok("rpm", [`--root=${root}`, "-e", "svc-server"]);
          assert.deepEqual(await systemctlCalls(root), [
            "stop svc-server.service",
            "disable svc-server.service",
            "daemon-reload",
          ]);
          assert.ok(!await exists(`${root}/usr/bin/svc-server`));
        },
      );

      await step(
        "apk and Arch packages read back (checksums, datahash, .MTREE); pacman installs and removes",
        async () => {
          const apk = `${DIST}agent-repo/${pkgFile(manifest, "apk", HOST_ARCH)}`;
          const check = await ok("python3", ["-c", APK_CHECK, apk]);
          assert.match(check, /^datahash ok$/m);
          assert.match(check, /^files \d+ ok$/m);
          assert.match(check, /^pkginfo pkgname = svc-agent$/m);
          const arch = `${DIST}agent-repo/${pkgFile(manifest, "arch", HOST_ARCH)}`;
          const info = await ok("pacman", ["-Qiip", arch]);
          assert.match(info, /^Name\s+: svc-agent$/m);
          assert.match(info, new RegExp(`^Version\\s+: ${VERSION.replaceAll(".", "\\.")}-1$`, "m"));
          assert.match(info, /^Install Script\s+: Yes$/m);
          const pkginfo = await ok("sh", ["-c", `zstd -dc '${arch}' | tar -xO .PKGINFO`]);
          assert.match(pkginfo, /^backup = etc\/svc\/agent\.yaml$/m);
          const mtree = await ok("sh", ["-c", `zstd -dc '${arch}' | python3 -c '${ARCH_CHECK}'`]);
          assert.match(mtree, /^mtree \d+ ok$/m);
          // pacman itself installs it into a throwaway root (running .INSTALL there) and removes it again.
          const proot = await throwawayRoot(`${base}/pacman-root`);
          await Deno.mkdir(`${proot}/var/lib/pacman`, { recursive: true });
          await Deno.writeTextFile(
            `${base}/pacman.conf`,
            "[options]\nArchitecture = auto\nSigLevel = Never\n",
          );
          const pac = (args: string[]) =>
            ok("pacman", [
              "--noconfirm",
              `--root=${proot}`,
              `--dbpath=${proot}/var/lib/pacman`,
              `--config=${base}/pacman.conf`,
              ...args,
            ]);
          await pac(["-U", "--nodeps", "--nodeps", arch]);
          assert.equal(await mode(`${proot}/etc/svc/agent.yaml`), 0o600);
          assert.equal(await mode(`${proot}/var/lib/svc-agent`), 0o750);
          assert.ok(await exists(`${proot}/usr/lib/systemd/system/svc-agent.service`));
          assert.deepEqual(await systemctlCalls(proot), ["daemon-reload"]);
          await pac(["-R", "--nodeps", "--nodeps", "svc-agent"]);
          assert.deepEqual(await systemctlCalls(proot), [
            "stop svc-agent.service",
            "disable svc-agent.service",
            "daemon-reload",
          ]);
          assert.ok(!await exists(`${proot}/usr/bin/svc-agent`));
        },
      );

      await step(
        "the wizard's Debian script installs and enrolls svc-agent; it applies a Firefox policy",
        async () => {
          const group = await api!.call("POST", "/api/v1/node-groups", { name: "wizard desktops" });
          const { token } = await api!.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
          const script = deployScript({
            origin: server!.baseUrl,
            family: "debian",
            arch: HOST_ARCH,
            caPem: await Deno.readTextFile(caFile),
            repoKey: await Deno.readTextFile(repoKey),
            packages: manifest.packages,
            enrollment: { token, policyPort: server!.policyPort },
          });
          const ovl = `${base}/overlay`;
          for (const d of ["upper", "work", "merged"]) await Deno.mkdir(`${ovl}/${d}`, { recursive: true });
          // The machine's own apt sources are hidden: this "node" knows only the svc repository.
          await Deno.writeTextFile(`${base}/deploy.sh`, script);
          const inside = (command: string) =>
            `set -e; mount -t overlay overlay -o lowerdir=/,upperdir=${ovl}/upper,workdir=${ovl}/work ${ovl}/merged; ` +
            `mount -t proc proc ${ovl}/merged/proc; mount --bind /dev ${ovl}/merged/dev; ` +
            `mount -t tmpfs tmpfs ${ovl}/merged/run; ` +
            `rm -f ${ovl}/merged/etc/apt/sources.list ${ovl}/merged/etc/apt/sources.list.d/*; ${command}`;
          // No systemd runs in this "node"; the test starts the installed daemon itself below.
          const r = await sh("unshare", [
            "-m",
            "sh",
            "-c",
            inside(`chroot ${ovl}/merged /bin/sh ${base}/deploy.sh`),
          ]);
          // Everything but the start ran: `systemctl enable --now` enables the unit, then cannot start it
          // because no systemd runs here (the script's last command, so nothing after it was skipped).
          if (r.code !== 0) {
            assert.match(r.stderr, /has not been booted with systemd/, `${r.stdout}\n${r.stderr}`);
          }
          assert.match(r.stdout, /Enrolled node/);
          const upper = `${ovl}/upper`;
          assert.ok(
            await exists(`${upper}/etc/ssl/certs/svc-ca.pem`),
            "update-ca-certificates trusted the CA",
          );
          assert.ok(await exists(`${upper}/var/lib/svc-agent/agent.crt`), "the agent enrolled");
          assert.ok(!await exists(`${upper}/etc/svc/enrollment-token`), "the token file is removed");
          assert.ok(
            await exists(`${upper}/etc/systemd/system/multi-user.target.wants/svc-agent.service`),
            "enabled",
          );
          assert.match(await Deno.readTextFile(`${upper}/etc/svc/agent.yaml`), /^ {2}address: localhost$/m);

          // The installed agent (inside the package, inside the "node") enforces a Firefox policy.
          const fx = "/srv/fxroot";
          await Deno.mkdir(`${upper}${fx}/usr/lib/firefox`, { recursive: true });
          await Deno.mkdir(`${upper}${fx}/etc/firefox/policies`, { recursive: true });
          await replaceText(
            `${upper}/etc/svc/agent.yaml`,
            (t) => t.replace(/^ {2}root_dir: \/$/m, `  root_dir: ${fx}`),
          );
          const policy = await api!.call("POST", "/api/v1/policies/all", {
            name: "wizard firefox",
            type: "Firefox",
            content: JSON.stringify({ DisableTelemetry: true }),
          });
          await api!.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
          const binding = await api!.call("POST", "/api/v1/policy-bindings", {
            policy_id: policy.id,
            node_group_id: group.id,
            priority: 10,
          });
          await api!.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
          const agent = new Deno.Command("unshare", {
            args: [
              "-m",
              "sh",
              "-c",
              inside(`exec chroot ${ovl}/merged /usr/bin/svc-agent --config /etc/svc/agent.yaml`),
            ],
            stdout: "piped",
            stderr: "piped",
          }).spawn();
          let out = "";
          const pump = async (s: ReadableStream<Uint8Array>) => {
            for await (const c of s.pipeThrough(new TextDecoderStream())) {
              out += c;
            }
          };
          const pumps = Promise.all([pump(agent.stdout), pump(agent.stderr)]);
          try {
            await eventually(
              async () => {
                const text = await Deno.readTextFile(`${upper}${fx}/etc/firefox/policies/policies.json`)
                  .catch(() => "");
                return text && JSON.parse(text).policies?.DisableTelemetry === true;
              },
              60_000,
              "the Firefox policy applied by the installed agent",
              () => out,
            );
          } finally {
            agent.kill("SIGTERM");
            await agent.status;
            await pumps;
          }
        },
      );
    } finally {
      await stopGpgAgents(base);
      api?.close();
      await server?.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});

/** Reads an apk the way apk-tools does: two gzip members, datahash, per-file SHA-1 pax records. */
const APK_CHECK = `
import sys, zlib, hashlib, tarfile, io
data = open(sys.argv[1], "rb").read()
d = zlib.decompressobj(16 + zlib.MAX_WBITS)
control = d.decompress(data)
rest = d.unused_data
pkginfo = None
with tarfile.open(fileobj=io.BytesIO(control + b"\\0" * 1024)) as t:
    for m in t.getmembers():
        if m.name == ".PKGINFO":
            pkginfo = t.extractfile(m).read().decode()
fields = dict(l.split(" = ", 1) for l in pkginfo.splitlines() if " = " in l)
print("pkginfo pkgname = " + fields["pkgname"])
assert hashlib.sha256(rest).hexdigest() == fields["datahash"], "datahash"
print("datahash ok")
n = 0
with tarfile.open(fileobj=io.BytesIO(zlib.decompress(rest, 16 + zlib.MAX_WBITS))) as t:
    for m in t.getmembers():
        if m.isfile():
            want = m.pax_headers["APK-TOOLS.checksum.SHA1"]
            assert hashlib.sha1(t.extractfile(m).read()).hexdigest() == want, m.name
            assert m.uid == 0 and m.gid == 0, m.name
            n += 1
print("files %d ok" % n)
`;

/** Checks every file of an Arch package against its .MTREE digests. */
const ARCH_CHECK = `
import sys, tarfile, gzip, hashlib, io
t = tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()))
names = t.getnames()
assert names[0] == ".PKGINFO", names[:3]
mtree = gzip.decompress(t.extractfile(".MTREE").read()).decode().splitlines()
n = 0
for line in mtree[2:]:
    parts = line.split(" ")
    path = parts[0][2:]
    attrs = dict(p.split("=", 1) for p in parts[1:])
    if "sha256digest" in attrs:
        assert hashlib.sha256(t.extractfile(path).read()).hexdigest() == attrs["sha256digest"], path
        n += 1
print("mtree %d ok" % n)
`;
