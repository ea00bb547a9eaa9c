/**
 * TPM2 and Tang protectors with the real tools: a real `tang` server (tangd behind socat on 127.0.0.1) and
 * a software TPM (`swtpm`), a LUKS2 image, and a real svc server that turns the policy into
 * ENROLL_TPM2/ENROLL_TANG tasks. The agent binds with `systemd-cryptenroll` (PCR 7) and `clevis luks bind`
 * (pinned thumbprint); `clevis luks pass` then recovers a passphrase through the Tang server that opens the
 * image. A Tang server whose key does not match the pinned thumbprint is refused and no keyslot appears.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { dbTest } from "../helpers/db.ts";
import { bind, createGroup, enrollAgent, releasedPolicy, startAgentServer } from "../helpers/agents.ts";
import { freePort } from "../helpers/process.ts";
import { RootFs } from "../../agent/fs.ts";
import { agentPolicyClient, luksNode } from "./helpers.ts";
import { Runner } from "../../agent/runner.ts";
import { createLogger } from "../../agent/log.ts";
import { DiskEncryptionManager } from "../../agent/disk_encryption/manager.ts";
import { readHeader, slotOpenedBy } from "../../agent/disk_encryption/cryptsetup.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";

const runner = new Runner();
const TOOLS = {
  cryptsetup: "/usr/sbin/cryptsetup",
  tangd: "/usr/libexec/tangd",
  "tangd-keygen": "/usr/libexec/tangd-keygen",
  socat: "/usr/bin/socat",
  clevis: "/usr/bin/clevis",
  swtpm: "/usr/bin/swtpm",
  "systemd-cryptenroll": "/usr/bin/systemd-cryptenroll",
};
const missing = (await Promise.all(
  Object.entries(TOOLS).map(async ([name, path]) =>
    (await Deno.stat(path).then(() => true, () => false)) ? [] : [name]
  ),
)).flat();
const SKIP = missing.length
  ? `not installed here: ${
    missing.join(", ")
  } (.ci/run installs cryptsetup, tang, socat, clevis-luks, swtpm, systemd)`
  : undefined;
if (SKIP) console.warn(`disk_encryption_protectors_test skipped: ${SKIP}`);

async function waitPort(port: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`);
}

/** A Tang server on 127.0.0.1 with fresh keys; returns its URL, pinned thumbprint and stop function. */
async function startTang(dir: string) {
  await Deno.mkdir(dir, { recursive: true });
  assert.ok((await runner.run(TOOLS["tangd-keygen"], [dir])).success);
  const port = freePort();
  const child = new Deno.Command(TOOLS.socat, {
    args: [`TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork`, `EXEC:${TOOLS.tangd} ${dir}`],
    stdout: "null",
    stderr: "null",
  }).spawn();
  await waitPort(port);
  const thp = (await runner.run("tang-show-keys", [String(port)])).stdout.trim().split("\n")[0];
  assert.match(thp, /^[A-Za-z0-9_-]{16,}$/);
  return {
    url: `http://127.0.0.1:${port}`,
    thp,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

function isFree(port: number): boolean {
  try {
    Deno.listen({ hostname: "127.0.0.1", port }).close();
    return true;
  } catch {
    return false;
  }
}

async function startSwtpm(dir: string) {
  await Deno.mkdir(dir, { recursive: true });
  // The swtpm TCTI expects the control channel on the next port.
  let port = freePort();
  while (!isFree(port + 1)) port = freePort();
  const ctrl = port + 1;
  const child = new Deno.Command(TOOLS.swtpm, {
    args: [
      "socket",
      "--tpm2",
      "--tpmstate",
      `dir=${dir}`,
      "--server",
      `type=tcp,port=${port},bindaddr=127.0.0.1`,
      "--ctrl",
      `type=tcp,port=${ctrl},bindaddr=127.0.0.1`,
      "--flags",
      "not-need-init,startup-clear",
    ],
    stdout: "null",
    stderr: "null",
  }).spawn();
  await waitPort(port);
  return {
    tcti: `swtpm:host=127.0.0.1,port=${port}`,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

dbTest(
  "TPM2 (swtpm) and Tang (tangd + clevis) protectors from policy tasks; a wrong thumbprint is refused",
  async (db) => {
    const base = await Deno.makeTempDir({ prefix: "svc-de-prot-" });
    const tang = await startTang(join(base, "tang"));
    const impostor = await startTang(join(base, "tang-impostor"));
    const tpm = await startSwtpm(join(base, "tpm"));
    const server = await startAgentServer(db, {
      config: { diskEncryption: { kekFile: join(base, "kek"), createKekFile: true } },
    });
    try {
      const group = await createGroup(db, "laptops");
      const content = {
        tpm2: { enroll: true, pcrs: [7] },
        tang: { servers: [{ url: tang.url, thumbprint: tang.thp }], threshold: 1 },
      };
      const policyId = await releasedPolicy(db, {
        name: "fde",
        type: "DiskEncryption",
        content: JSON.stringify(content),
      });
      await bind(db, policyId, group);
      const agent = await enrollAgent(server, { name: "pc-1", groupId: group });
      const client = agentPolicyClient(server, agent);
      const { root, image, uuid } = await luksNode(runner, base, "unlock");

      let policyContent = content;
      const cached = (): CachedPolicy[] => [{
        id: policyId,
        name: "fde",
        type: "DiskEncryption",
        version: 1,
        priority: 0,
        content: JSON.stringify(policyContent),
      }];
      const logs: string[] = [];
      const manager = new DiskEncryptionManager({
        fs: await RootFs.open(root),
        runner,
        logger: createLogger({ sink: (line) => logs.push(line) }),
        dataDir: join(base, "agent-data"),
        clientId: "",
        devices: ["/images/disk.img"],
        unlockKeyDir: "/etc/svc/luks-keys",
        tpm2Device: tpm.tcti,
        policies: cached,
      });

      // A substituted Tang server (the pinned thumbprint belongs to the real one) is refused: the server's task
      // points the agent at the impostor's URL with the real thumbprint.
      policyContent = {
        ...content,
        tang: { servers: [{ url: impostor.url, thumbprint: tang.thp }], threshold: 1 },
      };
      await db.query("UPDATE policies SET content = $1 WHERE id = $2", [
        JSON.stringify(policyContent),
        policyId,
      ]);
      await manager.connected(client);
      let header = await readHeader(runner, image);
      assert.equal(
        header.tokens.filter((t) => t.type === "clevis").length,
        0,
        "no Tang keyslot for the impostor",
      );
      assert.equal(header.tokens.filter((t) => t.type === "systemd-tpm2").length, 1, "TPM2 enrolled");
      const [pending] = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM luks_tasks WHERE kind = 'enroll_tang' AND state = 'pending'",
      );
      assert.equal(pending.n, 1, "the Tang task stays pending");
      assert.ok(
        logs.some((l) =>
          l.includes("clevis luks bind failed") && l.includes("Unable to fetch advertisement")
        ),
        logs.join("\n"),
      );

      // The real server: bound, and the passphrase clevis recovers through Tang opens the image.
      policyContent = content;
      await db.query("UPDATE policies SET content = $1 WHERE id = $2", [JSON.stringify(content), policyId]);
      await manager.connected(client);
      header = await readHeader(runner, image);
      const tangToken = header.tokens.find((t) => t.type === "clevis");
      assert.ok(tangToken, "Tang keyslot present");
      const tpmToken = header.tokens.find((t) => t.type === "systemd-tpm2")!;
      assert.deepEqual(tpmToken.raw["tpm2-pcrs"], [7]);
      const pass = await runner.run("clevis", [
        "luks",
        "pass",
        "-d",
        image,
        "-s",
        String(tangToken.keyslots[0]),
      ]);
      assert.ok(pass.success, pass.stderr);
      assert.equal(await slotOpenedBy(runner, image, pass.stdout), tangToken.keyslots[0]);

      const [row] = await db.query<{ tpm2_enrolled: boolean; tpm2_pcrs: number[]; tang_enrolled: boolean }>(
        "SELECT tpm2_enrolled, tpm2_pcrs, tang_enrolled FROM luks_volumes WHERE luks_uuid = $1",
        [uuid],
      );
      assert.deepEqual(row, { tpm2_enrolled: true, tpm2_pcrs: [7], tang_enrolled: true });
      assert.equal((await db.query("SELECT 1 FROM luks_tasks WHERE state = 'pending'")).length, 0);
      client.close();
      agent.close();
    } finally {
      await server.stop();
      await tang.stop();
      await impostor.stop();
      await tpm.stop();
      await Deno.remove(base, { recursive: true });
    }
  },
  { ignore: !!SKIP },
);
