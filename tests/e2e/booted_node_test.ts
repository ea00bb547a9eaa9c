/**
 * The packaged agent as a user installs it, proven on a real Debian 12 booted with systemd as PID 1
 * (tests/helpers/booted_node.ts): the deploy-agent wizard's own Debian script (CA trust, signed apt repository,
 * `apt-get install svc-agent`, enrollment, `systemctl enable --now`), then, with the agent running under its
 * unit as systemd runs it:
 *
 * - the unit's hardening leaves /etc writable (ProtectSystem=full + ReadWritePaths=/etc did not, under
 *   systemd 252) and `systemd-analyze security` rates it;
 * - a Firefox policy that arrived before Firefox is INAPPLICABLE; `apt-get install firefox-esr` gets it written
 *   and COMPLIANT without any server change (the node watcher), and the delay is printed;
 * - `svc-agent status` works for a user without root;
 * - a hand edit is restored; a power cycle with the server stopped boots into an agent that enforces the stored
 *   policy set and restores edits offline; when the server is back the node is online again.
 *
 * Needs root, mmdebstrap and the packages of `deno task build --portable` (CI builds them and sets
 * SVC_REQUIRE_PACKAGES=1, so this cannot skip there).
 */
import assert from "node:assert/strict";
import { BootedNode, bootedNodeUnavailable } from "../helpers/booted_node.ts";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { Api, eventually, type Json } from "../helpers/agent_process.ts";
import { deployScript } from "../../web/src/deploy_script.ts";
import type { AgentStatus } from "../../agent/status.ts";

const DIST = new URL("../../dist/", import.meta.url).pathname;
const REQUIRED = Deno.env.get("SVC_REQUIRE_PACKAGES") === "1";
const HOST_ARCH = Deno.build.arch === "x86_64" ? "amd64" : "arm64";
const POLICIES_JSON = "/etc/firefox/policies/policies.json";

async function unavailable(): Promise<string | undefined> {
  if (!await Deno.stat(`${DIST}agent-repo/manifest.json`).then(() => true, () => false)) {
    return "dist/agent-repo is absent: run `deno task build --portable` first (CI does)";
  }
  return await bootedNodeUnavailable();
}

const reason = await unavailable();
if (reason && REQUIRED) throw new Error(`booted-node test cannot run but SVC_REQUIRE_PACKAGES=1: ${reason}`);
if (reason) console.error(`booted_node_test: skipped: ${reason}`);

Deno.test({
  name:
    "booted Debian 12: the wizard installs the agent; under systemd it enforces, follows installs, survives " +
    "an offline reboot",
  ignore: reason !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    let server: ServerProcess | undefined = await startServerProcess({
      config: { server: { hostnames: ["localhost"] }, agent_repo: { dir: `${DIST}agent-repo` } },
    });
    const ports = { web: server.webPort, policy: server.policyPort, metrics: server.metricsPort };
    let api: Api | undefined = await Api.login(server);
    let node: BootedNode | undefined;
    let failed = false;
    const step = async (name: string, fn: () => Promise<void>) => {
      if (failed) return;
      if (!(await t.step(name, fn))) failed = true;
    };
    const journal = () => node?.journal("svc-agent.service") ?? Promise.resolve("");
    let journalText = "";
    const context = () => journalText;
    const status = async (): Promise<AgentStatus | undefined> => {
      const r = await node!.exec(["runuser", "-u", "nobody", "--", "svc-agent", "status", "--json"]);
      journalText = await journal();
      return r.code === 0 ? JSON.parse(r.stdout) : undefined;
    };
    let groupId = "";
    let policyId = "";
    try {
      await step(
        "the wizard's Debian script installs, enrolls and starts svc-agent under systemd",
        async () => {
          node = await BootedNode.boot({ hostname: "booted-desk-1" });
          const group = await api!.call("POST", "/api/v1/node-groups", { name: "booted desktops" });
          groupId = group.id;
          const { token } = await api!.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
          const manifest = JSON.parse(await Deno.readTextFile(`${DIST}agent-repo/manifest.json`));
          const script = deployScript({
            origin: `https://localhost:${ports.web}`,
            family: "debian",
            arch: HOST_ARCH,
            caPem: await Deno.readTextFile(`${server!.dataDir}/pki/ca/ca.crt`),
            repoKey: await (await fetch(`${server!.baseUrl}/agent/repo-key.asc`, { client: api!.client }))
              .text(),
            packages: manifest.packages,
            enrollment: { token, policyPort: ports.policy },
          });
          await Deno.writeTextFile(node.hostPath("/root/deploy.sh"), script);
          const out = await node.sh("sh -e /root/deploy.sh 2>&1");
          assert.match(out, /Enrolled node "booted-desk-1"/);
          await eventually(
            async () => {
              const r = await node!.exec(["systemctl", "is-active", "svc-agent"]);
              journalText = await journal();
              return r.stdout.trim() === "active";
            },
            60_000,
            "svc-agent active",
            context,
          );
          await eventually(
            async () => {
              const page = await api!.call("GET", "/api/v1/nodes?search=booted-desk-1");
              return page.items.find((n: Json) => n.name === "booted-desk-1")?.status === "online";
            },
            60_000,
            "the node online",
            context,
          );
        },
      );

      await step("the unit can write /etc; systemd-analyze security rates its hardening", async () => {
        const mounts = await node!.sh(
          "cat /proc/$(systemctl show -p MainPID --value svc-agent)/mountinfo",
        );
        const etc = mounts.split("\n").find((l) => l.split(" ")[4] === "/etc");
        assert.ok(!etc || !/\sro[,\s]/.test(etc.split(" ").slice(5, 6).join(" ")), `/etc mount: ${etc}`);
        const usr = mounts.split("\n").find((l) => l.split(" ")[4] === "/usr");
        assert.match(usr ?? "", /^\S+ \S+ \S+ \S+ \/usr ro[,\s]/, "ProtectSystem keeps /usr read-only");
        const security = await node!.exec(["systemd-analyze", "security", "--no-pager", "svc-agent.service"]);
        const overall = /Overall exposure level for svc-agent\.service: ([\d.]+)/.exec(security.stdout);
        console.log(
          `systemd-analyze security svc-agent.service: ${overall?.[0] ?? security.stdout.slice(-300)}`,
        );
        assert.ok(overall, security.stdout + security.stderr);
        // An unhardened root service rates 9.6 ("UNSAFE"); each kept setting lowers it.
        assert.ok(Number(overall[1]) < 9.0, overall[0]);
      });

      await step(
        "a Firefox policy before Firefox: INAPPLICABLE; apt-get install firefox-esr gets it enforced",
        async () => {
          const policy = await api!.call("POST", "/api/v1/policies/all", {
            name: "booted firefox",
            type: "Firefox",
            content: JSON.stringify({ DisableTelemetry: true, DisablePocket: true }),
          });
          policyId = policy.id;
          await api!.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
          const binding = await api!.call("POST", "/api/v1/policy-bindings", {
            policy_id: policy.id,
            node_group_id: groupId,
            priority: 10,
          });
          await api!.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
          const before = await eventually(
            async () => {
              const s = await status();
              return s?.policies.find((p) => p.id === policyId);
            },
            60_000,
            "the policy's first result",
            context,
          );
          assert.equal(before.status, "INAPPLICABLE", before.message);
          assert.match(before.message, /Firefox is not installed/);

          await node!.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q firefox-esr >/dev/null 2>&1");
          const installed = Date.now();
          await eventually(
            async () => {
              const text = await Deno.readTextFile(node!.hostPath(POLICIES_JSON)).catch(() => "");
              return text && JSON.parse(text).policies?.DisableTelemetry === true;
            },
            60_000,
            "the Firefox policy on disk after apt-get install",
            context,
          );
          console.log(
            `Firefox policy on disk ${Date.now() - installed} ms after apt-get install firefox-esr finished`,
          );
          const after = await eventually(
            async () => {
              const p = (await status())?.policies.find((p) => p.id === policyId);
              return p?.status === "COMPLIANT" ? p : undefined;
            },
            60_000,
            "COMPLIANT read back on the node",
            context,
          );
          assert.equal(after.version, 1);
        },
      );

      await step("a hand edit of the managed file is restored", async () => {
        await node!.sh(`echo '{"policies": {}}' > ${POLICIES_JSON}`);
        await eventually(
          async () => {
            const text = await Deno.readTextFile(node!.hostPath(POLICIES_JSON)).catch(() => "");
            return text && JSON.parse(text).policies?.DisableTelemetry === true;
          },
          60_000,
          "the restore",
          context,
        );
      });

      await step(
        "power cycle with the server stopped: the stored set is enforced offline; then back online",
        async () => {
          api!.close();
          api = undefined;
          await server!.stop();
          await node!.reboot();
          await eventually(
            async () => {
              const s = await status();
              return s?.source === "stored" &&
                s.policies.find((p) => p.id === policyId)?.status === "COMPLIANT";
            },
            120_000,
            "the agent enforcing the stored set after the reboot",
            context,
          );
          await node!.sh(`echo '{"policies": {"DisableTelemetry": false}}' > ${POLICIES_JSON}`);
          await eventually(
            async () => {
              const text = await Deno.readTextFile(node!.hostPath(POLICIES_JSON)).catch(() => "");
              return text && JSON.parse(text).policies?.DisableTelemetry === true;
            },
            60_000,
            "the offline restore",
            context,
          );
          assert.notEqual((await status())?.connection.state, "connected");

          server = await startServerProcess({
            dataDir: server!.dataDir,
            ports,
            config: {
              server: { hostnames: ["localhost"] },
              agent_repo: { dir: `${DIST}agent-repo` },
            },
          });
          api = await Api.login(server);
          await eventually(
            async () => {
              const s = await status();
              return s?.connection.state === "connected" && s.source === "server";
            },
            150_000,
            "the agent connected again",
            context,
          );
          await eventually(
            async () => {
              const page = await api!.call("GET", "/api/v1/nodes?search=booted-desk-1");
              return page.items.find((n: Json) => n.name === "booted-desk-1")?.status === "online";
            },
            60_000,
            "the node online again",
            context,
          );
        },
      );
    } finally {
      await node?.dispose();
      api?.close();
      await server?.stop();
    }
  },
});
