/**
 * arm64 proven by running it: the arm64 svc-agent and svc-server, unpacked from their built debs, run under
 * Debian's qemu-user-static (`qemu-aarch64-static`, with the arm64 C library from `libc6:arm64`). The agent
 * answers `--version`/`--help`, enrolls against a real server, applies a Firefox policy under a temporary
 * root and reports COMPLIANT; the server answers `--version` and `check-config` (against PostgreSQL when
 * `SVC_TEST_DATABASE_URL` is set). Emulation is slow (minutes on a loaded machine), so every wait has a
 * generous deadline; the timings are printed, they are not targets.
 *
 * No binfmt handler is registered (that would change the whole machine): the test runs the package's own
 * runtime under qemu with exactly the arguments the package's launcher would pass it.
 */
import assert from "node:assert/strict";
import { e2eNode } from "../helpers/agent_fixtures.ts";
import { join } from "node:path";
import { stringify } from "yaml";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { Api, eventually, type Json } from "../helpers/agent_process.ts";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import { FIREFOX_MARKER_KEY } from "../../agent/enforcers/firefox.ts";
import { VERSION } from "../../shared/version.ts";

const DIST = new URL("../../dist/", import.meta.url).pathname;
const REQUIRED = Deno.env.get("SVC_REQUIRE_PACKAGES") === "1";
const QEMU = "qemu-aarch64-static";
/** The arm64 dynamic loader libc6:arm64 installs, which qemu finds under its default prefix `/`. */
const ARM64_LOADER = "/lib/ld-linux-aarch64.so.1";
/** One emulated step (a cold start of the runtime, an enrollment, a policy applied) on a loaded machine. */
const EMULATED_DEADLINE_MS = 900_000;
const NODE = "arm64-node-1";

const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

async function which(tool: string): Promise<boolean> {
  return (await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" }).output())
    .success;
}

async function missing(): Promise<string | undefined> {
  for (const app of ["svc-agent", "svc-server"]) {
    if (!await exists(`${DIST}packages/${app}_${VERSION}-1_arm64.deb`)) {
      return `dist/packages/${app}_${VERSION}-1_arm64.deb is absent: run \`deno task build --portable\` first`;
    }
  }
  if (!await which(QEMU)) return `${QEMU} is missing (Debian package qemu-user-static; .ci/run installs it)`;
  if (!await exists(ARM64_LOADER)) {
    return `${ARM64_LOADER} is missing: dpkg --add-architecture arm64 && apt-get install libc6:arm64 (.ci/run does)`;
  }
  if (!await which("dpkg-deb")) return "dpkg-deb is missing";
  return undefined;
}

const reason = await missing();
if (reason && REQUIRED) {
  throw new Error(`arm64 emulation test cannot run but SVC_REQUIRE_PACKAGES=1: ${reason}`);
}
if (reason) console.error(`arm64_emulation_test: skipped: ${reason}`);

/** Unpacks the arm64 deb of `app` into `dir` (what dpkg would install, without installing it). */
async function unpack(app: string, dir: string): Promise<void> {
  const out = await new Deno.Command("dpkg-deb", {
    args: ["-x", `${DIST}packages/${app}_${VERSION}-1_arm64.deb`, dir],
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

/** The runtime and arguments the launcher `/usr/lib/<app>/<app>` of an unpacked package execs. */
async function launcher(root: string, app: string): Promise<{ runtime: string; args: string[] }> {
  const lib = `${root}/usr/lib/${app}/lib`;
  const script = (await Deno.readTextFile(`${root}/usr/lib/${app}/${app}`)).replaceAll("\\\n", " ");
  const exec = /^exec "\$lib\/deno" (.*) "\$@"$/m.exec(script);
  assert.ok(exec, `the ${app} launcher execs its runtime:\n${script}`);
  const args = exec[1].trim().split(/\s+/).map((a) => a.replace(/^"\$lib\/(.*)"$/, `${lib}/$1`));
  return { runtime: `${lib}/deno`, args };
}

interface Emulated {
  code: number;
  out: string;
  seconds: number;
}

/** Runs `app` of the unpacked package at `root` under qemu to completion. */
async function emulate(root: string, app: string, args: string[], env: Record<string, string> = {}) {
  const { runtime, args: base } = await launcher(root, app);
  const started = performance.now();
  const out = await new Deno.Command(QEMU, {
    args: [runtime, ...base, ...args],
    env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return {
    code: out.code,
    out: d.decode(out.stdout) + d.decode(out.stderr),
    seconds: Math.round((performance.now() - started) / 100) / 10,
  } satisfies Emulated;
}

function timing(what: string, seconds: number): void {
  console.log(`arm64 under qemu: ${what}: ${seconds} s`);
}

Deno.test({
  name: "arm64 svc-agent and svc-server from their packages under qemu: --version, --help, check-config",
  ignore: reason !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "svc-arm64-" });
    const tdb = TEST_DATABASE_URL ? await freshDb("postgres") : undefined;
    await tdb?.db.close();
    try {
      await unpack("svc-agent", `${base}/agent`);
      await unpack("svc-server", `${base}/server`);
      const file = await new Deno.Command("file", {
        args: ["-b", `${base}/agent/usr/lib/svc-agent/lib/deno`],
      })
        .output().then((o) => new TextDecoder().decode(o.stdout), () => "");
      if (file) assert.match(file, /ARM aarch64/, "the package's runtime is an arm64 program");

      let r = await emulate(`${base}/agent`, "svc-agent", ["--version"]);
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, new RegExp(`svc-agent ${VERSION.replaceAll(".", "\\.")}`));
      timing("svc-agent --version", r.seconds);
      r = await emulate(`${base}/agent`, "svc-agent", ["--help"]);
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /usage: svc-agent/i);
      timing("svc-agent --help", r.seconds);

      r = await emulate(`${base}/server`, "svc-server", ["--version"]);
      assert.equal(r.code, 0, r.out);
      assert.equal(r.out.trim(), VERSION);
      timing("svc-server --version", r.seconds);

      const config = `${base}/server.yaml`;
      await Deno.writeTextFile(
        config,
        stringify({ server: { data_dir: `${base}/data` }, metrics: { listen_addr: "127.0.0.1:1" } }),
      );
      r = await emulate(`${base}/server`, "svc-server", ["check-config", "--no-db", "--config", config]);
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /^ok +configuration parses/m);
      timing("svc-server check-config --no-db", r.seconds);
      // A broken configuration is refused by the emulated server as by the native one.
      const broken = `${base}/broken.yaml`;
      await Deno.writeTextFile(broken, stringify({ server: { enrollment_port: "not a port" } }));
      r = await emulate(`${base}/server`, "svc-server", ["check-config", "--no-db", "--config", broken]);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /enrollment_port/);

      if (tdb) {
        // The database check reads the migrations embedded in the packaged program (no migrations/ there).
        r = await emulate(`${base}/server`, "svc-server", ["check-config", "--config", config], {
          SVC_DATABASE_URL: tdb.url,
        });
        assert.equal(r.code, 0, r.out);
        assert.match(r.out, /^ok +database/m);
        timing("svc-server check-config on PostgreSQL", r.seconds);
      } else {
        console.log(
          "arm64 under qemu: check-config with a database needs SVC_TEST_DATABASE_URL (CI sets it)",
        );
      }
    } finally {
      await tdb?.dispose().catch(() => {});
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "arm64 svc-agent under qemu enrolls, applies a Firefox policy under a temporary root, reports COMPLIANT",
  ignore: reason !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { base, root, policiesFile } = await e2eNode("svc-arm64-agent-");
    await Deno.writeTextFile(`${root}/etc/machine-id`, "fedcba9876543210fedcba9876543210\n");
    await unpack("svc-agent", `${base}/agent`);

    const server: ServerProcess = await startServerProcess();
    const api = await Api.login(server);
    const configPath = join(base, "agent.yaml");
    await Deno.writeTextFile(
      configPath,
      stringify({
        server: { address: "localhost", enrollment_port: server.webPort, policy_port: server.policyPort },
        agent: { client_id: NODE, root_dir: root },
        enrollment: { data_dir: join(base, "agent-data") },
      }),
    );
    await Deno.chmod(configPath, 0o600);
    const env = { SSL_CERT_FILE: join(server.dataDir, "pki", "ca", "ca.crt"), SVC_ENROLLMENT_TOKEN: "" };
    let daemon: Deno.ChildProcess | undefined;
    let daemonOut = "";
    try {
      const group = await api.call("POST", "/api/v1/node-groups", { name: "arm64 desktops" });
      const { token } = await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
      const tokenFile = join(base, "token");
      await Deno.writeTextFile(tokenFile, `${token}\n`);
      const enrolled = await emulate(`${base}/agent`, "svc-agent", [
        "--config",
        configPath,
        "--token-file",
        tokenFile,
      ], env);
      assert.equal(enrolled.code, 0, enrolled.out);
      assert.match(enrolled.out, new RegExp(`Enrolled node "${NODE}"`));
      timing("svc-agent enrollment", enrolled.seconds);

      const { runtime, args } = await launcher(`${base}/agent`, "svc-agent");
      const started = performance.now();
      daemon = new Deno.Command(QEMU, {
        args: [runtime, ...args, "--config", configPath],
        env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1", ...env },
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const pump = async (s: ReadableStream<Uint8Array>) => {
        for await (const c of s.pipeThrough(new TextDecoderStream())) daemonOut += c;
      };
      const pumps = Promise.all([pump(daemon.stdout), pump(daemon.stderr)]);
      const node = await eventually(
        async () => {
          const page = await api.call("GET", `/api/v1/nodes?search=${NODE}`);
          const n = page.items.find((x: Json) => x.name === NODE);
          return n?.status === "online" ? n : undefined;
        },
        EMULATED_DEADLINE_MS,
        "the arm64 node online",
        () => daemonOut,
      );
      timing("svc-agent daemon start to online", Math.round((performance.now() - started) / 100) / 10);

      const policy = await api.call("POST", "/api/v1/policies/all", {
        name: "arm64 baseline",
        type: "Firefox",
        content: JSON.stringify({ DisableTelemetry: true, DisplayMenuBar: "never" }),
      });
      await api.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
      const binding = await api.call("POST", "/api/v1/policy-bindings", {
        policy_id: policy.id,
        node_group_id: group.id,
        priority: 10,
      });
      const bound = performance.now();
      await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
      await eventually(
        async () => {
          const text = await Deno.readTextFile(policiesFile).catch(() => undefined);
          const parsed = text ? JSON.parse(text) : undefined;
          return parsed && FIREFOX_MARKER_KEY in parsed && parsed.policies.DisableTelemetry === true &&
            parsed.policies.DisplayMenuBar === "never";
        },
        EMULATED_DEADLINE_MS,
        "policies.json written by the arm64 agent",
        () => daemonOut,
      );
      const compliance = await eventually(
        async () => {
          const c = await api.call("GET", `/api/v1/nodes/${node.id}/compliance`);
          return c.results.length === 1 && c.results[0].status === "compliant" ? c : undefined;
        },
        EMULATED_DEADLINE_MS,
        "COMPLIANT reported by the arm64 agent",
        () => daemonOut,
      );
      assert.equal(compliance.results[0].status, "compliant");
      timing("policy enabled to COMPLIANT", Math.round((performance.now() - bound) / 100) / 10);
      const n = await api.call("GET", `/api/v1/nodes/${node.id}`);
      assert.equal(n.agent_version, VERSION);

      daemon.kill("SIGTERM");
      await daemon.status;
      await pumps;
      daemon = undefined;
    } finally {
      if (daemon) {
        try {
          daemon.kill("SIGKILL");
        } catch { /* already gone */ }
        await daemon.status;
      }
      api.close();
      await server.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});
