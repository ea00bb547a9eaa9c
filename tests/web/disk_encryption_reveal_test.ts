/**
 * The recovery-key reveal flow in a real browser (Debian's Chromium) against the real server: a simulated
 * agent escrows a key for a real LUKS2 image; the administrator opens /disk-encryption, sees the volume
 * escrowed and compliant, opens the reveal dialog, is refused with a wrong password (the dialog says so and
 * no key appears), then reveals with a reason and the right password: the key shown opens the image, a
 * countdown runs, "Hide now" removes it from the page, and a second reveal hides itself when the countdown
 * ends (timers sped up in the page). Every attempt is in the audit log; axe-core finds nothing at all (every impact) on the list and the dialog.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { ElementHandle } from "puppeteer-core";
import { createClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { LuksKeySlotKind, PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";
import { createEnrollmentToken, createNodeGroup } from "../../server/domain/node_groups.ts";
import { DRIVERS } from "../helpers/db.ts";
import { axeViolations, browserTest, browserTestSkipped, pageText, typeInto } from "../helpers/browser.ts";
import {
  type InProcessConsoleServer,
  openConsoleLoggedIn,
  startConsoleServer,
  withConsole,
} from "../helpers/console_login.ts";
import { generateRecoveryKey } from "../../agent/disk_encryption/recovery_key.ts";
import { Runner } from "../../agent/runner.ts";
import { slotOpenedBy } from "../../agent/disk_encryption/cryptsetup.ts";

const SKIP = browserTestSkipped("disk encryption reveal browser test", ["/usr/sbin/cryptsetup"]);

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const window: any;

/**
 * A LUKS2 image in `dir` and a simulated agent, enrolled into `server`, that reports it and escrows a
 * recovery key for it (added to the image and confirmed, as the agent does).
 */
async function escrowedVolume(server: InProcessConsoleServer, dir: string) {
  const runner = new Runner();
  const image = join(dir, "disk.img");
  const f = await Deno.open(image, { create: true, write: true });
  await f.truncate(20 * 1024 * 1024);
  f.close();
  const fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
  const format = ["luksFormat", "--type", "luks2", ...fast, "-q", image, "--key-file=-"];
  assert.ok((await runner.run("cryptsetup", format, { stdin: "unlock" })).success);
  const uuid = (await runner.run("cryptsetup", ["luksUUID", image])).stdout.trim();
  const { ctx, ports } = server.running;
  const db = ctx.db;
  const group = await db.transaction((tx) => createNodeGroup(tx, { name: "laptops" }));
  const { token } = await createEnrollmentToken(db, group.id, { createdBy: "test" });
  const ca = Buffer.from(ctx.ca.certPem);
  const enrollment = createClient(EnrollmentService, `localhost:${ports.web}`, {
    credentials: grpc.credentials.createSsl(ca),
  });
  const { keyPem, csrPem } = await generateKeyAndCsr("pc-ui");
  const enrolled = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-ui" });
  enrollment.close();
  const agent = createClient(PolicyService, `localhost:${ports.policy}`, {
    credentials: grpc.credentials.createSsl(ca, Buffer.from(keyPem), Buffer.from(enrolled.signedCertPem)),
  });
  const key = generateRecoveryKey();
  try {
    await agent.reportDiskEncryptionState({
      volumes: [{
        device: "/dev/nvme0n1p3",
        uuid,
        luksVersion: 2,
        cipher: "aes-xts-plain64",
        keySizeBits: 512,
        keySlots: [{ slot: 0, kind: LuksKeySlotKind.PASSPHRASE }],
      }],
    });
    const { keyId } = await agent.escrowRecoveryKey({ volumeUuid: uuid, recoveryKey: key });
    const keyFile = join(dir, "new.key");
    await Deno.writeTextFile(keyFile, key, { mode: 0o600 });
    const addKey = ["luksAddKey", ...fast, "--key-file=-", image, keyFile];
    const add = await runner.run("cryptsetup", addKey, { stdin: "unlock" });
    assert.ok(add.success, add.stderr);
    await Deno.remove(keyFile);
    await agent.confirmRecoveryKey({ keyId, keySlot: (await slotOpenedBy(runner, image, key))! });
  } finally {
    agent.close();
  }
  return { runner, image, uuid, key };
}

browserTest(
  "reveal flow in Chromium: refused without re-authentication, shown with a countdown, hidden again",
  SKIP,
  async () => {
    const base = await Deno.makeTempDir({ prefix: "svc-de-ui-" });
    try {
      const server = await startConsoleServer({
        settings: {
          "security.jwt_secret": "reveal-test-jwt-secret-0123456789abcdef012345",
          "disk_encryption.kek_file": join(base, "kek"),
          "disk_encryption.create_kek_file": true,
        },
        database: DRIVERS[DRIVERS.length - 1],
      });
      await withConsole(server, { path: false }, async ({ page }) => {
        const { runner, image, uuid, key } = await escrowedVolume(server, base);
        await openConsoleLoggedIn(page, server.web, { username: "admin", password: server.adminPassword }, {
          path: "/disk-encryption",
        });
        await page.waitForFunction((u: string) => document.body.innerText.includes(u), {}, uuid);
        const listed = await pageText(page);
        assert.match(listed, /pc-ui/);
        assert.match(listed, /Escrowed/);
        assert.ok(!listed.includes(key), "the list never shows key material");
        assert.deepEqual(await axeViolations(page), []);

        const openDialog = async () => {
          const button = await page.waitForFunction(() =>
            [...document.querySelectorAll("sl-button")].find((b: { textContent: string }) =>
              b.textContent.trim() === "Reveal key"
            ) ?? null
          );
          await (button.asElement() as ElementHandle).click();
          await page.waitForSelector("svc-disk-reveal-dialog textarea[name=reason]", { visible: true });
        };
        const submit = async (reason: string, password: string) => {
          await typeInto(page, "svc-disk-reveal-dialog textarea[name=reason]", reason);
          await typeInto(page, "svc-disk-reveal-dialog input[name=password]", password);
          await page.click("svc-disk-reveal-dialog sl-button[type=submit]");
        };

        // Wrong password: refused, said so, no key.
        await openDialog();
        assert.deepEqual(await axeViolations(page), []);
        await submit("user locked out", "not-the-password");
        await page.waitForSelector("svc-disk-reveal-dialog p.error", { visible: true });
        assert.match(
          await page.$eval("svc-disk-reveal-dialog p.error", (e) => e.textContent ?? ""),
          /password is wrong/,
        );
        assert.ok(!(await pageText(page)).includes(key));

        // Right password: the key, a countdown, copy; Hide now removes it.
        await typeInto(page, "svc-disk-reveal-dialog input[name=password]", server.adminPassword);
        await page.click("svc-disk-reveal-dialog sl-button[type=submit]");
        const shown = await page.waitForSelector("[data-testid=recovery-key]", { visible: true });
        const revealed = await shown!.evaluate((e) => e.textContent ?? "");
        assert.equal(revealed, key);
        assert.notEqual(
          await slotOpenedBy(runner, image, revealed),
          undefined,
          "the shown key opens the image",
        );
        const countdown = await page.$eval("[data-testid=countdown]", (e) => e.textContent ?? "");
        assert.match(countdown, /Hidden again in [12]:\d\d/);
        await page.waitForFunction(
          (first: string) => document.querySelector("[data-testid=countdown]")?.textContent !== first,
          {},
          countdown,
        );
        const hideNow = await page.waitForFunction(() =>
          [...document.querySelectorAll("svc-disk-reveal-dialog sl-button")].find((
            b: { textContent: string },
          ) => b.textContent.trim() === "Hide now") ?? null
        );
        await (hideNow.asElement() as ElementHandle).click();
        await page.waitForSelector("[data-testid=recovery-key]", { hidden: true });
        assert.ok(!(await pageText(page)).includes(key), "hidden means gone from the page");
        assert.ok(!(await page.content()).includes(key));

        // Second reveal with timers sped up 100×: the key hides itself when the countdown ends.
        await page.evaluate(() => {
          const original = window.setInterval.bind(window);
          window.setInterval = (fn: () => void, ms: number) => original(fn, ms >= 1000 ? ms / 100 : ms);
        });
        await submit("second look", server.adminPassword);
        await page.waitForSelector("[data-testid=recovery-key]", { visible: true });
        await page.waitForSelector("[data-testid=recovery-key]", { hidden: true, timeout: 30_000 });
        assert.match(await pageText(page), /The key is hidden again/);
        assert.ok(!(await page.content()).includes(key));

        const rows = await server.running.ctx.db.query<{ action: string; outcome: string }>(
          `SELECT action, outcome FROM audit_logs WHERE resource_type = 'luks_volume'
            AND action <> 'disk_encryption.key_confirmed' ORDER BY id`,
        );
        assert.deepEqual(rows.map((r) => [r.action, r.outcome]), [
          // The wrong password: a failed reveal by someone allowed to reveal, not an access denial.
          ["disk_encryption.reveal", "failure"],
          ["disk_encryption.reveal", "success"],
          ["disk_encryption.reveal", "success"],
        ]);
      });
    } finally {
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
);
