/**
 * The Certificates and Proxy types enforced by the packaged agent under systemd, on a real Debian 12 booted with
 * systemd as PID 1 (tests/helpers/booted_node.ts), installed by the deploy-agent wizard's own script
 * (tests/helpers/booted_agent.ts):
 *
 * - a CA distributed by a Certificates policy lands in the system store: the bundle holds it, `openssl verify`
 *   accepts a server certificate it issued, and curl in the node reaches an HTTPS server on the host that
 *   presents that certificate, without `-k`; when the binding is disabled the file goes, the store is Debian's
 *   again byte for byte and curl refuses the server;
 * - a Proxy policy reaches /etc/environment (a login shell of a local user sees it through pam_env), apt (its
 *   merged configuration) and GNOME (dconf, locked), is COMPLIANT as read back, and goes away on release.
 *
 * The node's root needs nothing beyond the shared list (ca-certificates, dconf-cli, gsettings-desktop-schemas).
 *
 * Needs root, mmdebstrap and the packages of `deno task build --portable` (CI builds them and sets
 * SVC_REQUIRE_PACKAGES=1, so this cannot skip there).
 */
import assert from "node:assert/strict";
import { BootedNode, bootedNodeUnavailable } from "../helpers/booted_node.ts";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { Api, eventually } from "../helpers/agent_process.ts";
import {
  agentStatus,
  deployAgent,
  DIST,
  packagesUnavailable,
  releaseAndBind,
} from "../helpers/booted_agent.ts";
import { issueServerCertificate, makeCertificate } from "../helpers/test_ca.ts";

const REQUIRED = Deno.env.get("SVC_REQUIRE_PACKAGES") === "1";
const NODE = "booted-types-1";
const BUNDLE = "/etc/ssl/certs/ca-certificates.crt";

const reason = await packagesUnavailable() ?? await bootedNodeUnavailable();
if (reason && REQUIRED) {
  throw new Error(`booted-node types test cannot run but SVC_REQUIRE_PACKAGES=1: ${reason}`);
}
if (reason) console.error(`booted_node_types_test: skipped: ${reason}`);

Deno.test({
  name:
    "booted Debian 12: the agent under systemd installs and removes a CA, and applies and removes a proxy",
  ignore: reason !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const server: ServerProcess = await startServerProcess({
      config: { server: { hostnames: ["localhost"] }, agent_repo: { dir: `${DIST}agent-repo` } },
    });
    const api = await Api.login(server);
    let node: BootedNode | undefined;
    let journalText = "";
    const context = () => journalText;
    const result = async (policyId: string, want: (status: string) => boolean) =>
      await eventually(
        async () => {
          const p = (await agentStatus(node!))?.policies.find((p) => p.id === policyId);
          journalText = await node!.journal("svc-agent.service");
          return p && want(p.status) ? p : undefined;
        },
        120_000,
        `policy ${policyId}'s result`,
        context,
      );
    let failed = false;
    const step = async (name: string, fn: () => Promise<void>) => {
      if (failed) return;
      if (!(await t.step(name, fn))) failed = true;
    };
    // An HTTPS server on the host (the node shares its network) whose certificate the test CA issued.
    const ca = await makeCertificate({ key: "ec:P-256", subject: "/O=Example Corp/CN=Booted Test Root" });
    const leaf = await issueServerCertificate(ca, ["localhost"]);
    const https = Deno.serve(
      { hostname: "127.0.0.1", port: 0, cert: leaf.pem, key: leaf.keyPem, onListen() {} },
      () => new Response("svc-trusted\n"),
    );
    const url = `https://localhost:${https.addr.port}/`;
    let groupId = "";
    try {
      await step("the wizard's Debian script installs, enrolls and starts svc-agent", async () => {
        node = await BootedNode.boot({ hostname: NODE });
        groupId = await deployAgent(node, server, api, {
          nodeName: NODE,
          groupName: "booted types",
          context,
        });
      });

      await step(
        "a CA lands in the system store, OpenSSL and curl trust it; release takes it back",
        async () => {
          const bundleBefore = await node!.sh(`sha256sum ${BUNDLE}`);
          const linksBefore = await node!.sh("ls /etc/ssl/certs | sort");
          await Deno.writeTextFile(node!.hostPath("/root/leaf.pem"), leaf.pem);
          assert.notEqual((await node!.exec(["curl", "-fsS", url])).code, 0, "untrusted before");

          const { policyId, bindingId } = await releaseAndBind(api, groupId, {
            type: "Certificates",
            name: "booted trust",
            content: { certificates: [{ name: "booted-root", pem: ca.pem }] },
          });
          const compliant = await result(policyId, (s) => s !== "UNKNOWN");
          assert.equal(compliant.status, "COMPLIANT", compliant.message);
          assert.equal(
            await Deno.readTextFile(
              node!.hostPath("/usr/local/share/ca-certificates/svc-policy-booted-root.crt"),
            ),
            ca.pem,
          );
          assert.match(await node!.sh(`openssl verify -CAfile ${BUNDLE} /root/leaf.pem`), /leaf.pem: OK/);
          assert.equal(
            await node!.sh(`curl -fsS ${url}`),
            "svc-trusted\n",
            "curl trusts it through the store",
          );

          await api.call("PUT", `/api/v1/policy-bindings/${bindingId}`, { state: "disabled" });
          await eventually(
            async () =>
              (await node!.exec([
                "test",
                "-e",
                "/usr/local/share/ca-certificates/svc-policy-booted-root.crt",
              ]))
                .code !== 0,
            60_000,
            "the anchor file removed",
            context,
          );
          await eventually(
            async () => (await node!.sh(`sha256sum ${BUNDLE}`)) === bundleBefore,
            60_000,
            "Debian's bundle back",
            context,
          );
          assert.equal(await node!.sh("ls /etc/ssl/certs | sort"), linksBefore, "no link left over");
          assert.equal(await node!.sh("find /etc/ssl/certs -xtype l | wc -l"), "0\n", "no dangling link");
          assert.notEqual(
            (await node!.exec(["openssl", "verify", "-CAfile", BUNDLE, "/root/leaf.pem"])).code,
            0,
          );
          assert.notEqual((await node!.exec(["curl", "-fsS", url])).code, 0, "untrusted after release");
        },
      );

      await step("a proxy reaches the environment, apt and GNOME; release takes it back", async () => {
        const environment = () => node!.sh("cat /etc/environment 2>/dev/null || true");
        const environmentBefore = await environment();
        await node!.sh("useradd -m -s /bin/bash bob");
        const { policyId, bindingId } = await releaseAndBind(api, groupId, {
          type: "Proxy",
          name: "booted proxy",
          content: {
            manual: { http: { host: "proxy.example.com", port: 3128 } },
            no_proxy: [".example.org"],
          },
        });
        const applied = await result(policyId, (s) => s !== "UNKNOWN");
        const items = Object.fromEntries(applied.items.map((i) => [i.key, `${i.status} ${i.message}`]));
        assert.equal(applied.status, "COMPLIANT", JSON.stringify(items, null, 1));
        for (const key of ["environment", "apt", "GNOME"]) assert.match(items[key], /^COMPLIANT/, key);
        assert.match(items.dnf, /^INAPPLICABLE dnf is not installed/);

        // A login shell of a local user gets the variables through pam_env.
        assert.equal(
          await node!.sh("su - bob -c 'printf %s \"$http_proxy|$no_proxy\"'"),
          "http://proxy.example.com:3128/|localhost,127.0.0.0/8,::1,.example.org",
        );
        assert.match(
          await node!.sh("apt-config dump Acquire::http::Proxy"),
          /"http:\/\/proxy.example.com:3128\/"/,
        );
        assert.equal((await node!.sh("dconf read /system/proxy/mode")).trim(), "'manual'");
        assert.equal((await node!.sh("dconf read /system/proxy/http/host")).trim(), "'proxy.example.com'");
        assert.match(await node!.sh("dconf list-locks /system/proxy/"), /\/system\/proxy\/mode/);

        await api.call("PUT", `/api/v1/policy-bindings/${bindingId}`, { state: "disabled" });
        await eventually(
          async () => (await environment()) === environmentBefore,
          60_000,
          "/etc/environment back",
          context,
        );
        assert.equal((await node!.exec(["test", "-e", "/etc/apt/apt.conf.d/80svc-proxy"])).code, 1);
        assert.equal(await node!.sh("su - bob -c 'printf %s \"$http_proxy\"'"), "");
        assert.notEqual((await node!.sh("dconf read /system/proxy/mode")).trim(), "'manual'");
      });
    } finally {
      if (failed) console.error(`svc-agent journal:\n${journalText}`);
      await https.shutdown();
      await node?.dispose();
      await server.stop();
    }
  },
});
