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
import {
  agentStatus,
  deployAgent,
  DIST,
  HOST_ARCH,
  nodeOnline as serverSeesOnline,
  packagesUnavailable,
  releaseAndBind,
} from "../helpers/booted_agent.ts";
import { buildFlatpakRepo, type FlatpakTestRepo } from "../helpers/flatpak_repo.ts";
import type { AgentStatus } from "../../agent/status.ts";
import { openDatabase } from "../../server/db/mod.ts";

const REQUIRED = Deno.env.get("SVC_REQUIRE_PACKAGES") === "1";
const POLICIES_JSON = "/etc/firefox/policies/policies.json";

async function unavailable(): Promise<string | undefined> {
  return await packagesUnavailable() ?? await bootedNodeUnavailable();
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
    // Escrowed recovery keys are sealed with a key-encryption key kept beside the server's data.
    const kekDir = await Deno.makeTempDir({ prefix: "svc-booted-kek-" });
    const serverConfig = {
      server: { hostnames: ["localhost"] },
      agent_repo: { dir: `${DIST}agent-repo` },
      disk_encryption: { kek_file: `${kekDir}/disk.kek`, create_kek_file: true },
    };
    let server: ServerProcess | undefined = await startServerProcess({ config: serverConfig });
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
      const s = await agentStatus(node!);
      journalText = await journal();
      return s;
    };
    const nodeOnline = () => serverSeesOnline(api!, "booted-desk-1");
    let groupId = "";
    let policyId = "";
    let repo: FlatpakTestRepo | undefined;
    try {
      await step(
        "the wizard's Debian script installs, enrolls and starts svc-agent under systemd",
        async () => {
          node = await BootedNode.boot({ hostname: "booted-desk-1" });
          groupId = await deployAgent(node, server!, api!, {
            nodeName: "booted-desk-1",
            groupName: "booted desktops",
            context: () => journalText,
          });
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
          ({ policyId } = await releaseAndBind(api!, groupId, {
            type: "Firefox",
            name: "booted firefox",
            content: { DisableTelemetry: true, DisablePocket: true },
            priority: 10,
          }));
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

      await step(
        "every desktop type under the unit: COMPLIANT as read back, tamper restored, removal restores",
        async () => {
          // What the node has before svc: a local account, firewalld's stock zones, no svc files.
          await node!.sh(
            "useradd -m alice && apt-get install -y -q chromium >/dev/null 2>&1 && " +
              "apt-get install -y -q --no-install-recommends kwin-x11 >/dev/null 2>&1",
          );
          const timeConfBefore = await node!.sh("cat /etc/security/time.conf");
          const policies: Record<string, unknown> = {
            Dconf: {
              entries: [
                {
                  schema_id: "org.gnome.desktop.screensaver",
                  key: "lock-enabled",
                  value: "true",
                  lock: true,
                },
                {
                  schema_id: "org.gnome.desktop.session",
                  key: "idle-delay",
                  value: "uint32 300",
                  lock: true,
                },
              ],
            },
            Polkit: {
              rules: [{
                name: "no-hostname",
                action_ids: ["org.freedesktop.hostname1.set-static-hostname"],
                result: "POLKIT_RESULT_NO",
                match: { unix_users: ["alice"] },
              }],
            },
            SessionAccess: {
              rules: [{
                name: "alice-daytime",
                users: ["alice"],
                effect: "SESSION_ACCESS_EFFECT_ALLOW",
                windows: [{ start: "06:00", end: "22:00" }],
              }, {
                // No local account is in pupils yet: one is added below, with no server change.
                name: "pupils-school",
                groups: ["pupils"],
                effect: "SESSION_ACCESS_EFFECT_ALLOW",
                windows: [{ start: "08:00", end: "16:00" }],
              }],
              pam_enforcement: true,
            },
            Firewalld: { zones: [{ name: "public", target: "FIREWALLD_TARGET_DROP", services: ["https"] }] },
            Chrome: { BrowserSignin: 0, PasswordManagerEnabled: false },
            Kconfig: { entries: [{ file: "kscreenlockerrc", group: "Daemon", key: "Timeout", value: "5" }] },
          };
          const ids: Record<string, string> = {};
          const bindings: string[] = [];
          for (const [type, content] of Object.entries(policies)) {
            const made = await releaseAndBind(api!, groupId, {
              type,
              name: `booted ${type}`,
              content,
              // alice is the only account the rule names, so the server's lockout guard asks for a reason.
              lockoutReason: type === "SessionAccess"
                ? "booted-node test: alice is a test account"
                : undefined,
            });
            ids[type] = made.policyId;
            bindings.push(made.bindingId);
          }
          const results = await eventually(
            async () => {
              const s = await status();
              const byType = Object.fromEntries(
                Object.entries(ids).map(([type, id]) => [type, s?.policies.find((p) => p.id === id)]),
              );
              return Object.values(byType).every((p) => p && p.status !== "UNKNOWN") ? byType : undefined;
            },
            180_000,
            "a result for every type",
            context,
          );
          const summary = Object.entries(results).map(([t, p]) => `${t}: ${p!.status} ${p!.message}`).join(
            "\n",
          );
          console.log(`every type in the booted node:\n${summary}`);
          for (const type of ["Dconf", "Polkit", "SessionAccess", "Firewalld", "Chrome", "Kconfig"]) {
            assert.equal(results[type]!.status, "COMPLIANT", `${type}: ${summary}`);
          }
          // Read back as Plasma would: the system-wide kscreenlockerrc through KDE's own reader.
          assert.equal(
            (await node!.sh(
              "XDG_CONFIG_DIRS=/etc/xdg kreadconfig5 --file kscreenlockerrc --group Daemon --key Timeout",
            ))
              .trim(),
            "5",
          );
          // Read back on the node with the real tools, as a user's session would see it.
          assert.equal(
            (await node!.sh("dconf read /org/gnome/desktop/screensaver/lock-enabled")).trim(),
            "true",
          );
          assert.match(await node!.sh("cat /etc/firewalld/zones/public.xml"), /target="DROP"[\s\S]*https/);
          assert.match(await node!.sh("cat /etc/security/time.conf"), /;alice;/);
          // A local account joins the group: the agent recompiles the rules on its own (accounts are watched).
          await node!.sh("groupadd pupils && useradd -m -G pupils carol");
          await eventually(
            async () =>
              /;carol;/.test(
                await Deno.readTextFile(node!.hostPath("/etc/security/time.conf")).catch(() => ""),
              ),
            60_000,
            "carol's pam_time line after she was added to pupils",
            context,
          );
          assert.match(await node!.sh("cat /etc/chromium/policies/managed/*.json"), /PasswordManagerEnabled/);

          // Tamper: a locally changed dconf key file is put back.
          const keyfile = (await node!.sh("grep -l lock-enabled /etc/dconf/db/*.d/* | head -1")).trim();
          await node!.sh(`sed -i 's/lock-enabled=true/lock-enabled=false/' ${keyfile}`);
          await eventually(
            async () => {
              const text = await Deno.readTextFile(node!.hostPath(keyfile)).catch(() => "");
              return /lock-enabled=true/.test(text);
            },
            60_000,
            "the dconf key file restored",
            context,
          );

          // Removal: every binding disabled, the node is as it was.
          for (const id of bindings) {
            await api!.call("PUT", `/api/v1/policy-bindings/${id}`, { state: "disabled" });
          }
          await eventually(
            async () => {
              const s = await status();
              return s && Object.values(ids).every((id) => !s.policies.some((p) => p.id === id)) &&
                s.managedFiles.every((f) => f.type === "Firefox");
            },
            120_000,
            "every type's files released",
            context,
          );
          assert.equal(await node!.sh("cat /etc/security/time.conf"), timeConfBefore);
          assert.equal((await node!.exec(["test", "-e", "/etc/firewalld/zones/public.xml"])).code, 1);
          assert.equal((await node!.sh("dconf read /org/gnome/desktop/screensaver/lock-enabled")).trim(), "");
          assert.equal((await node!.exec(["sh", "-c", "ls /etc/chromium/policies/managed/*.json"])).code, 2);
        },
      );

      await step(
        "Thunderbird and Flatpak under the unit: installed from Debian, COMPLIANT, taken back",
        async () => {
          await node!.sh("apt-get install -y -q thunderbird flatpak >/dev/null 2>&1");
          repo = await buildFlatpakRepo();
          const contents: Record<string, unknown> = {
            Thunderbird: { DisableTelemetry: true },
            Flatpak: {
              remotes: [{ name: "svctest", url: repo.url, gpg_key: repo.gpgKeyBase64, priority: 7 }],
              apps: [{ app_id: repo.appId, remote: "svctest", state: "FLATPAK_APP_STATE_PRESENT" }],
            },
          };
          const ids: Record<string, string> = {};
          const bindings: string[] = [];
          for (const [type, content] of Object.entries(contents)) {
            const made = await releaseAndBind(api!, groupId, {
              type,
              name: `booted ${type}`,
              content,
            });
            ids[type] = made.policyId;
            bindings.push(made.bindingId);
          }
          for (const [type, id] of Object.entries(ids)) {
            await eventually(
              async () => {
                const p = (await status())?.policies.find((p) => p.id === id);
                return p?.status === "COMPLIANT" ? p : undefined;
              },
              180_000,
              `${type} COMPLIANT`,
              context,
            );
          }
          assert.match(
            await node!.sh("flatpak --system list --app --columns=application"),
            new RegExp(repo.appId),
          );
          assert.match(await node!.sh("cat /etc/thunderbird/policies/policies.json"), /DisableTelemetry/);
          // flatpak's triggers run in bubblewrap: the unit must let them (RestrictNamespaces=yes did not).
          assert.doesNotMatch(await node!.journal("svc-agent.service", 400), /Creating new namespace failed/);

          for (const id of bindings) {
            await api!.call("PUT", `/api/v1/policy-bindings/${id}`, { state: "disabled" });
          }
          await eventually(
            async () => {
              const apps = await node!.sh("flatpak --system list --app --columns=application");
              const remotes = await node!.sh("flatpak --system remotes --columns=name");
              return !apps.includes(repo!.appId) && !remotes.includes("svctest");
            },
            180_000,
            "svc's Flatpak app and remote taken back",
            context,
          );
        },
      );

      await step(
        "DiskEncryption: a LUKS disk that appears is inventoried, its recovery key escrowed",
        async () => {
          await node!.sh(
            "apt-get install -y -q cryptsetup-bin >/dev/null 2>&1 && mkdir -p /images && " +
              "install -d -m 0700 /etc/svc/luks-keys && " +
              "sed -i 's|^  devices: .*|  devices: /images/disk.img|' /etc/svc/agent.yaml && systemctl restart svc-agent",
          );
          const disks = await releaseAndBind(api!, groupId, {
            type: "DiskEncryption",
            name: "booted disks",
            content: { require_encryption: true, min_luks_version: 2, escrow_recovery_key: true },
          });
          await eventually(
            async () => {
              const s = await status();
              return s?.connection.state === "connected" && s.policies.some((p) => p.id === disks.policyId);
            },
            120_000,
            "the agent back with the DiskEncryption policy",
            context,
          );

          // The disk appears after the policy: LUKS2 on an image file, the unlock secret where the agent looks.
          await node!.sh(
            "truncate -s 20M /images/disk.img && printf 'initial secret' | cryptsetup luksFormat --type luks2 " +
              "--pbkdf pbkdf2 --pbkdf-force-iterations 1000 -q /images/disk.img --key-file=- && " +
              "printf 'initial secret' > /etc/svc/luks-keys/$(cryptsetup luksUUID /images/disk.img).key && " +
              "chmod 600 /etc/svc/luks-keys/*.key",
          );
          const uuid = (await node!.sh("cryptsetup luksUUID /images/disk.img")).trim();
          const volume = await eventually(
            async () => {
              const page = await api!.call("GET", "/api/v1/disk-encryption/volumes");
              const v = page.items.find((v: Json) => v.luks_uuid === uuid);
              return v && v.escrow_state === "escrowed" ? v : undefined;
            },
            180_000,
            "the new volume inventoried with an escrowed recovery key",
            context,
          );
          assert.equal(volume.node_name, "booted-desk-1");
          await eventually(
            async () => {
              const p = (await status())?.policies.find((p) => p.id === disks.policyId);
              return p?.status === "COMPLIANT" ? p : undefined;
            },
            180_000,
            "DiskEncryption COMPLIANT",
            context,
          );
          // The escrowed key is in a keyslot of the real header.
          assert.match(await node!.sh("cryptsetup luksDump /images/disk.img"), /^\s+1: luks2/m);
          await api!.call("PUT", `/api/v1/policy-bindings/${disks.bindingId}`, { state: "disabled" });
        },
      );

      // --- Privilege and Scripts (issue 35, types1): one block. ---
      await step(
        "Privilege under the unit: sudo -l shows the grant, the local sudo group is revoked, visudo -c passes",
        async () => {
          await node!.sh(
            "id alice >/dev/null 2>&1 || useradd -m alice; useradd -m bob && usermod -aG sudo bob",
          );
          const made = await releaseAndBind(api!, groupId, {
            type: "Privilege",
            name: "booted admins",
            content: {
              entries: [{
                name: "alice",
                user: "alice",
                effect: "PRIVILEGE_EFFECT_ALLOW",
                sudo_nopasswd: true,
              }],
              local_sudo_group_not_admin: true,
            },
          });
          const result = await eventually(
            async () => {
              const p = (await status())?.policies.find((p) => p.id === made.policyId);
              return p && p.status !== "UNKNOWN" ? p : undefined;
            },
            120_000,
            "the Privilege policy's result",
            context,
          );
          console.log(
            `Privilege in the booted node: ${result.status} ${result.message}\n` +
              result.items.map((i) => `  ${i.key}: ${i.status} ${i.message}`).join("\n"),
          );
          assert.equal(result.status, "COMPLIANT", result.message);
          assert.match(await node!.sh("sudo -l -U alice"), /\(ALL : ALL\) NOPASSWD: ALL/);
          assert.equal((await node!.exec(["runuser", "-u", "alice", "--", "sudo", "-n", "true"])).code, 0);
          assert.equal(
            (await node!.exec(["sudo", "-n", "-l", "-U", "bob", "/usr/bin/true"])).code,
            1,
            "bob revoked",
          );
          assert.equal((await node!.exec(["visudo", "-c"])).code, 0);
          assert.equal((await node!.sh("stat -c %a /etc/sudoers.d/zz-svc-privilege")).trim(), "440");
          const pkcheck = result.items.find((i) => i.key === "entries[0].pkcheck:alice");
          assert.equal(pkcheck?.status, "COMPLIANT", `polkitd offers alice: ${JSON.stringify(pkcheck)}`);

          await api!.call("PUT", `/api/v1/policy-bindings/${made.bindingId}`, { state: "disabled" });
          await eventually(
            async () => (await node!.exec(["test", "-e", "/etc/sudoers.d/zz-svc-privilege"])).code === 1,
            60_000,
            "the sudoers file taken back",
            context,
          );
          assert.equal(
            (await node!.exec(["sudo", "-n", "-l", "-U", "bob", "/usr/bin/true"])).code,
            0,
            "bob again",
          );
        },
      );

      await step(
        "Scripts under the unit: a signed startup script runs once via systemd and is reported; a failure is " +
          "ERROR with its output; content tampered in the database is refused and does not run",
        async () => {
          const hello = await releaseAndBind(api!, groupId, {
            type: "Scripts",
            name: "booted hello",
            content: {
              scripts: [{
                name: "hello",
                trigger: "SCRIPT_TRIGGER_MACHINE_STARTUP",
                body: '#!/bin/bash\necho "hello from $(id -un)"\ndate +%s%N >> /root/svc-script-runs\n',
              }],
            },
          });
          const ran = await eventually(
            async () => {
              const p = (await status())?.policies.find((p) => p.id === hello.policyId);
              return p?.status === "COMPLIANT" ? p : undefined;
            },
            120_000,
            "the startup script run and reported",
            context,
          );
          console.log(`Scripts in the booted node: ${ran.items.map((i) => i.message).join("; ")}`);
          // The status file any local user reads keeps the exit code; the output reaches the admin only.
          assert.match(ran.items[0].message, /ran \(exit 0\).*output withheld here/);
          assert.doesNotMatch(JSON.stringify(ran), /hello from root/);
          const reported = async (policyId: string) =>
            JSON.stringify(await api!.call("GET", `/api/v1/compliance?policy_id=${policyId}`));
          await eventually(
            async () => /hello from root/.test(await reported(hello.policyId)) || undefined,
            120_000,
            "the script's output in the server's compliance report",
            context,
          );
          const unit = `svc-script-${hello.policyId}-hello.service`;
          assert.match(await node!.sh(`journalctl -u ${unit} -o cat --no-pager`), /hello from root/);
          assert.equal((await node!.sh("wc -l < /root/svc-script-runs")).trim(), "1");
          // Never twice for the same version: an agent restart re-syncs, the script does not run again.
          await node!.sh("systemctl restart svc-agent");
          await eventually(
            async () => {
              const s = await status();
              return s?.connection.state === "connected" &&
                s.policies.find((p) => p.id === hello.policyId)?.status === "COMPLIANT";
            },
            120_000,
            "the agent back, the script still reported",
            context,
          );
          assert.equal((await node!.sh("wc -l < /root/svc-script-runs")).trim(), "1", "ran once");

          const failing = await releaseAndBind(api!, groupId, {
            type: "Scripts",
            name: "booted failing",
            content: {
              scripts: [{
                name: "fails",
                trigger: "SCRIPT_TRIGGER_MACHINE_STARTUP",
                body: "echo 'cannot reach the share' >&2\nexit 3\n",
              }],
            },
          });
          const failed = await eventually(
            async () => {
              const p = (await status())?.policies.find((p) => p.id === failing.policyId);
              return p?.status === "ERROR" ? p : undefined;
            },
            120_000,
            "the failing script reported ERROR",
            context,
          );
          assert.match(failed.message, /exit 3 \(output withheld here/);
          await eventually(
            async () =>
              /exit 3: .*cannot reach the share/.test(await reported(failing.policyId)) || undefined,
            120_000,
            "the failing script's output in the server's compliance report",
            context,
          );

          // Tamper with the released content in the server's database (as an attacker with database access
          // would): the signature no longer verifies, so the node refuses it and runs nothing of it.
          api!.close();
          api = undefined;
          await server!.stop();
          const db = await openDatabase({ url: "", dataDir: server!.dataDir });
          try {
            const [row] = await db.query<{ content: string }>("SELECT content FROM policies WHERE id = $1", [
              hello.policyId,
            ]);
            const content = JSON.parse(row.content);
            content.scripts[0].body = "touch /root/svc-tampered\n";
            await db.query("UPDATE policies SET content = $2 WHERE id = $1", [
              hello.policyId,
              JSON.stringify(content),
            ]);
          } finally {
            await db.close();
          }
          server = await startServerProcess({ dataDir: server!.dataDir, ports, config: serverConfig });
          api = await Api.login(server);
          // A priority change publishes a resync: the node receives the tampered content.
          await api.call("PUT", `/api/v1/policy-bindings/${hello.bindingId}`, { priority: 6 });
          const refused = await eventually(
            async () => {
              const p = (await status())?.policies.find((p) => p.id === hello.policyId);
              return p?.status === "ERROR" ? p : undefined;
            },
            150_000,
            "the tampered script refused",
            context,
          );
          assert.match(
            refused.message,
            /refused, nothing of this policy runs on this node: .*does not verify/,
          );
          assert.equal(
            (await node!.exec(["test", "-e", "/root/svc-tampered"])).code,
            1,
            "the tampered script never ran",
          );
          assert.equal(
            (await node!.exec(["test", "-e", `/etc/systemd/system/${unit}`])).code,
            1,
            "its unit is gone",
          );
          for (const made of [hello, failing]) {
            await api.call("PUT", `/api/v1/policy-bindings/${made.bindingId}`, { state: "disabled" });
          }
        },
      );
      // --- end of Privilege and Scripts ---

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

          server = await startServerProcess({ dataDir: server!.dataDir, ports, config: serverConfig });
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
          await eventually(nodeOnline, 60_000, "the node online again", context);
        },
      );

      await step(
        "upgrade to the next package version: one restart, identity and config kept, nothing lifted",
        async () => {
          // The next version: this build's agent deb with a higher version, as the repository would offer it.
          const build = JSON.parse(await Deno.readTextFile(`${DIST}build.json`));
          const deb = build.packages.find((p: string) =>
            new RegExp(`svc-agent_[^/]*_${HOST_ARCH}\\.deb$`).test(p)
          );
          const work = await Deno.makeTempDir({ prefix: "svc-next-" });
          try {
            const run = async (cmd: string, args: string[]) => {
              const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
              assert.ok(out.success, new TextDecoder().decode(out.stderr));
            };
            await run("dpkg-deb", ["-R", `${DIST}${deb}`, `${work}/pkg`]);
            const control = await Deno.readTextFile(`${work}/pkg/DEBIAN/control`);
            await Deno.writeTextFile(
              `${work}/pkg/DEBIAN/control`,
              control.replace(/^Version: (.*)$/m, "Version: $1.1"),
            );
            await run("dpkg-deb", [
              "-Zgzip",
              "-z1",
              "-b",
              `${work}/pkg`,
              node!.hostPath("/root/svc-agent-next.deb"),
            ]);
          } finally {
            await Deno.remove(work, { recursive: true });
          }
          const pidBefore = (await node!.sh("systemctl show -p MainPID --value svc-agent")).trim();
          const certBefore = await node!.sh("sha256sum /var/lib/svc-agent/agent.crt /etc/svc/agent.yaml");
          // Watch the managed file through the whole upgrade: it must never lose the policy.
          let lifted = "";
          let watching = true;
          const watcher = (async () => {
            while (watching) {
              const text = await Deno.readTextFile(node!.hostPath(POLICIES_JSON)).catch(() => "");
              if (!lifted && !/"DisableTelemetry": true/.test(text)) lifted = text || "(missing)";
              await new Promise((r) => setTimeout(r, 25));
            }
          })();
          try {
            const t0 = Date.now();
            await node!.sh("apt-get install -y -q /root/svc-agent-next.deb >/dev/null 2>&1");
            console.log(`upgrade: apt-get install took ${Date.now() - t0} ms`);
            const pidAfter = await eventually(
              async () => {
                const pid = (await node!.sh("systemctl show -p MainPID --value svc-agent")).trim();
                return pid !== pidBefore && pid !== "0" ? pid : undefined;
              },
              60_000,
              "the agent restarted into the new version",
              context,
            );
            assert.ok(pidAfter);
            const t1 = Date.now();
            await eventually(
              async () => {
                const s = await status();
                return s?.connection.state === "connected" && Number(s.pid) === Number(pidAfter);
              },
              120_000,
              "the new agent connected",
              context,
            );
            console.log(`upgrade: the new agent connected ${Date.now() - t1} ms after its start was seen`);
            await new Promise((r) => setTimeout(r, 2_000));
          } finally {
            watching = false;
            await watcher;
          }
          assert.equal(lifted, "", `the policy was lifted during the upgrade: ${lifted}`);
          assert.match(await node!.sh("dpkg-query -W -f '${Version}' svc-agent"), /\.1$/);
          assert.equal(
            await node!.sh("sha256sum /var/lib/svc-agent/agent.crt /etc/svc/agent.yaml"),
            certBefore,
          );
          assert.equal((await node!.sh("systemctl show -p NRestarts --value svc-agent")).trim(), "0");
        },
      );

      await step("purge: the package's files go and svc's managed files are taken back", async () => {
        await node!.sh("apt-get purge -y -q svc-agent >/dev/null 2>&1");
        assert.notEqual((await node!.exec(["systemctl", "is-active", "svc-agent"])).stdout.trim(), "active");
        const policies = await Deno.readTextFile(node!.hostPath(POLICIES_JSON)).catch(() => undefined);
        assert.ok(
          policies === undefined || !/DisableTelemetry/.test(policies),
          `still enforced: ${policies}`,
        );
        for (const gone of ["/var/lib/svc-agent", "/etc/svc/agent.yaml", "/usr/bin/svc-agent"]) {
          assert.equal((await node!.exec(["test", "-e", gone])).code, 1, `${gone} is gone`);
        }
      });
    } finally {
      await Deno.remove(kekDir, { recursive: true }).catch(() => {});
      await repo?.close();
      await node?.dispose();
      api?.close();
      await server?.stop();
    }
  },
});
