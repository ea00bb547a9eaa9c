/**
 * The packaged svc-server as systemd runs it, on a real Debian 12 booted with systemd as PID 1
 * (tests/helpers/booted_node.ts): the deb installed with apt, `systemctl enable --now svc-server`, and then what
 * an operator relies on, checked on the running unit rather than on the unpacked files:
 *
 * - it starts under its hardening (`ProtectSystem=strict`, the `svc` user, no capabilities but binding a low
 *   port) on the embedded database in its state directory, and answers `/api/v1/version` on the web port;
 * - the process runs as `svc`, writes only under /var/lib/svc (the rest of the file system is read-only to it),
 *   and its initial admin password is a 0600 file the operator can read;
 * - `systemd-analyze security` rates the unit (printed; must stay in systemd's "OK" band or better);
 * - a restart keeps the CA and the admin password (the state directory survives), a `kill -9` is restarted by
 *   the unit, and `apt-get purge` stops the service and removes the unit.
 *
 * Ports: the node shares the host's network, so the unit is given free ports through a drop-in, as an operator
 * would override the packaged configuration.
 *
 * Needs root, mmdebstrap and the packages of `deno task build --portable` (CI builds them and sets
 * SVC_REQUIRE_PACKAGES=1, so this cannot skip there).
 */
import assert from "node:assert/strict";
import { BootedNode, bootedNodeUnavailable } from "../helpers/booted_node.ts";
import { DIST, HOST_ARCH, packagesUnavailable } from "../helpers/booted_agent.ts";
import { eventually } from "../helpers/agent_process.ts";
import { freePort } from "../helpers/process.ts";
import { VERSION } from "../../shared/version.ts";

const REQUIRED = Deno.env.get("SVC_REQUIRE_PACKAGES") === "1";
/** Where the server keeps its CA certificate (server.data_dir/pki/ca). */
const CA_CERT = "/var/lib/svc/pki/ca/ca.crt";
const DEB = `${DIST}packages/svc-server_${VERSION}-1_${HOST_ARCH}.deb`;

const reason = await packagesUnavailable() ?? await bootedNodeUnavailable();
if (reason && REQUIRED) {
  throw new Error(`booted-server test cannot run but SVC_REQUIRE_PACKAGES=1: ${reason}`);
}
if (reason) console.error(`booted_server_test: skipped: ${reason}`);

/** The unit's main process id in the node (0 when it is not running). */
async function mainPid(node: BootedNode): Promise<number> {
  const r = await node.exec(["systemctl", "show", "-p", "MainPID", "--value", "svc-server"]);
  return Number(r.stdout.trim()) || 0;
}

/** The version answer of the web port, read from inside the node (TLS with the server's generated CA). */
async function version(node: BootedNode, port: number): Promise<string | undefined> {
  const r = await node.exec([
    "curl",
    "-sS",
    "--max-time",
    "5",
    "--cacert",
    CA_CERT,
    `https://localhost:${port}/api/v1/version`,
  ]);
  return r.code === 0 ? r.stdout : undefined;
}

Deno.test({
  name: "booted Debian 12: the packaged svc-server runs under its hardened unit, restarts, and is purged",
  ignore: reason !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    let node: BootedNode | undefined;
    const web = freePort();
    const policy = freePort();
    // The unit's journal, read while waiting so that a timeout can show it (the context callback is synchronous).
    let journalText = "";
    const journal = () => journalText;
    const readJournal = async () => {
      journalText = node ? await node.journal("svc-server.service", 60) : "";
    };
    const answering = async () => {
      await readJournal();
      return await version(node!, web);
    };
    let failed = false;
    const step = async (name: string, fn: () => Promise<void>) => {
      if (failed) return;
      if (!(await t.step(name, fn))) failed = true;
    };
    try {
      await step(
        "apt installs the deb; systemctl enable --now starts it on the embedded database",
        async () => {
          node = await BootedNode.boot({ hostname: "booted-server-1" });
          await Deno.copyFile(DEB, node.hostPath("/root/svc-server.deb"));
          await node.sh(
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends /root/svc-server.deb " +
              ">/dev/null 2>&1 || (apt-get install -y --no-install-recommends /root/svc-server.deb; exit 1)",
          );
          // The operator's override of the packaged configuration: ports and the name agents use.
          await node.sh(
            "mkdir -p /etc/systemd/system/svc-server.service.d && printf '%s\\n' '[Service]' " +
              `'Environment=SVC_SERVER_ENROLLMENT_PORT=${web}' 'Environment=SVC_SERVER_POLICY_PORT=${policy}' ` +
              "'Environment=SVC_SERVER_HOSTNAMES=localhost' > /etc/systemd/system/svc-server.service.d/ports.conf " +
              "&& systemctl daemon-reload && systemctl enable --now svc-server",
          );
          const answer = await eventually(
            () => version(node!, web),
            180_000,
            "svc-server answering /api/v1/version under systemd",
            journal,
          );
          assert.equal(JSON.parse(answer).version, VERSION);
          assert.equal((await node.exec(["systemctl", "is-active", "svc-server"])).stdout.trim(), "active");
        },
      );

      await step(
        "it runs as svc, writes only its state directory, and systemd-analyze rates the unit",
        async () => {
          const pid = await mainPid(node!);
          await readJournal();
          assert.ok(pid > 0, journal());
          const status = await node!.sh(`cat /proc/${pid}/status`);
          const svcUid = (await node!.sh("id -u svc")).trim();
          assert.match(status, new RegExp(`^Uid:\\s+${svcUid}\\s+${svcUid}\\s+${svcUid}\\s+${svcUid}$`, "m"));
          assert.match(status, /^CapEff:\s+0000000000000400$/m, "only CAP_NET_BIND_SERVICE");
          // What the process sees: /etc and /usr read-only, /var/lib/svc writable.
          const mounts = await node!.sh(`cat /proc/${pid}/mountinfo`);
          const options = (path: string) =>
            mounts.split("\n").map((l) => l.split(" ")).filter((f) => f[4] === path).map((f) => f[5]).at(-1);
          assert.match(
            options("/usr") ?? options("/") ?? "",
            /^ro\b/,
            "the system is read-only to the service",
          );
          assert.match(options("/var/lib/svc") ?? "", /^rw\b/, "its state directory is writable");
          // Its state: the embedded database, the CA and the initial admin password, private to svc.
          const listing = await node!.sh(
            "stat -c '%U %a %n' /var/lib/svc /var/lib/svc/initial_admin_password",
          );
          assert.match(listing, /^svc 700 \/var\/lib\/svc$/m);
          assert.match(listing, /^svc 600 \/var\/lib\/svc\/initial_admin_password$/m);
          const security = await node!.exec([
            "systemd-analyze",
            "security",
            "--no-pager",
            "svc-server.service",
          ]);
          const overall = /Overall exposure level for svc-server\.service: ([\d.]+) (\S+)/.exec(
            security.stdout,
          );
          console.log(
            `systemd-analyze security svc-server.service: ${overall?.[0] ?? security.stdout.slice(-300)}`,
          );
          assert.ok(overall, security.stdout + security.stderr);
          assert.ok(
            Number(overall[1]) <= 4.9,
            `exposure ${overall[1]} ${overall[2]}: not in systemd's OK band`,
          );
        },
      );

      await step(
        "a restart keeps the CA and the admin password; kill -9 is restarted by the unit",
        async () => {
          const state = `sha256sum ${CA_CERT} /var/lib/svc/initial_admin_password`;
          const before = await node!.sh(state);
          await node!.sh("systemctl restart svc-server");
          await eventually(answering, 180_000, "svc-server back after a restart", journal);
          assert.equal(await node!.sh(state), before);
          const pid = await mainPid(node!);
          await node!.sh(`kill -9 ${pid}`);
          await eventually(
            async () => {
              const now = await mainPid(node!);
              return now !== 0 && now !== pid && await version(node!, web) !== undefined;
            },
            180_000,
            "svc-server restarted by its unit after kill -9",
            journal,
          );
          assert.equal(await node!.sh(state), before);
        },
      );

      await step("apt-get purge stops the service and removes the unit", async () => {
        await node!.sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q svc-server >/dev/null 2>&1");
        assert.notEqual((await node!.exec(["systemctl", "is-active", "svc-server"])).stdout.trim(), "active");
        assert.equal(await version(node!, web), undefined);
        const unit = await node!.exec(["test", "-e", "/lib/systemd/system/svc-server.service"]);
        assert.notEqual(unit.code, 0, "the unit file is gone");
      });
    } finally {
      if (failed) console.error(await readJournal().then(journal, () => ""));
      await node?.dispose();
    }
  },
});
