/**
 * The recovery-key reveal flow in a real browser (Debian's Chromium) against the real server: a simulated
 * agent escrows a key for a real LUKS2 image; the administrator opens /disk-encryption, sees the volume
 * escrowed and compliant, opens the reveal dialog, is refused with a wrong password (the dialog says so and
 * no key appears), then reveals with a reason and the right password: the key shown opens the image, a
 * countdown runs, "Hide now" removes it from the page, and a second reveal hides itself when the countdown
 * ends (timers sped up in the page). Every attempt is in the audit log; axe finds no serious violation.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import puppeteer, { type ElementHandle, type Page } from "puppeteer-core";
import { resolveConfig } from "../../server/config/config.ts";
import { startServer } from "../../server/server.ts";
import { createLogger } from "../../server/core/log.ts";
import { createClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { LuksKeySlotKind, PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";
import { createEnrollmentToken, createNodeGroup } from "../../server/domain/node_groups.ts";
import { localServerSettings } from "../helpers/process.ts";
import { DRIVERS, freshDb } from "../helpers/db.ts";
import { generateRecoveryKey } from "../../agent/disk_encryption/recovery_key.ts";
import { Runner } from "../../agent/runner.ts";
import { slotOpenedBy } from "../../agent/disk_encryption/cryptsetup.ts";

const CHROMIUM = "/usr/bin/chromium";
const ADMIN_PASSWORD = "Admin-Passw0rd-for-reveal-tests";
const haveTools = await Promise.all(
  [CHROMIUM, "/usr/sbin/cryptsetup"].map((p) => Deno.stat(p).then(() => true, () => false)),
);
const SKIP = haveTools.every(Boolean)
  ? undefined
  : "Chromium or cryptsetup is not installed (.ci/run installs both)";
if (SKIP) console.warn(`disk_encryption_reveal_test skipped: ${SKIP}`);

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const window: any;

async function fill(page: Page, selector: string, value: string): Promise<void> {
  const input = await page.waitForSelector(selector, { visible: true });
  await input!.click({ count: 3 });
  await input!.type(value);
}

const AXE_SOURCE = await Deno.readTextFile(
  new URL("../../node_modules/axe-core/axe.min.js", import.meta.url),
);

/** Serious and critical axe-core violations of the current page (injected through DevTools, CSP intact). */
async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const found = await page.evaluate(async () => {
    // deno-lint-ignore no-explicit-any
    const r = await (globalThis as any).axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v: { id: string; impact: string; help: string }) => [v.id, v.impact, v.help]);
  }) as string[][];
  return found.filter(([, impact]) => impact === "serious" || impact === "critical").map((v) => v.join(": "));
}

async function bodyText(page: Page): Promise<string> {
  return await page.evaluate(() => document.body.innerText as string);
}

Deno.test({
  name: "reveal flow in Chromium: refused without re-authentication, shown with a countdown, hidden again",
  ignore: !!SKIP,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "svc-de-ui-" });
    const config = resolveConfig(
      localServerSettings(join(base, "data"), {
        "security.admin_password": ADMIN_PASSWORD,
        "security.jwt_secret": "reveal-test-jwt-secret-0123456789abcdef012345",
        "disk_encryption.kek_file": join(base, "kek"),
        "disk_encryption.create_kek_file": true,
      }),
      {},
    );
    const database = await freshDb(DRIVERS[DRIVERS.length - 1]);
    const server = await startServer(config, { db: database.db, log: createLogger("warn") });
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--ignore-certificate-errors",
        `--user-data-dir=${join(base, "profile")}`,
      ],
    });
    try {
      // A LUKS2 image and a simulated agent that escrows a key for it.
      const runner = new Runner();
      const image = join(base, "disk.img");
      const f = await Deno.open(image, { create: true, write: true });
      await f.truncate(20 * 1024 * 1024);
      f.close();
      const fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
      assert.ok(
        (await runner.run("cryptsetup", [
          "luksFormat",
          "--type",
          "luks2",
          ...fast,
          "-q",
          image,
          "--key-file=-",
        ], {
          stdin: "unlock",
        })).success,
      );
      const uuid = (await runner.run("cryptsetup", ["luksUUID", image])).stdout.trim();
      const db = server.ctx.db;
      const group = await db.transaction((tx) => createNodeGroup(tx, { name: "laptops" }));
      const { token } = await createEnrollmentToken(db, group.id, { createdBy: "test" });
      const ca = Buffer.from(server.ctx.ca.certPem);
      const enrollment = createClient(EnrollmentService, `localhost:${server.ports.web}`, {
        credentials: grpc.credentials.createSsl(ca),
      });
      const { keyPem, csrPem } = await generateKeyAndCsr("pc-ui");
      const enrolled = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-ui" });
      enrollment.close();
      const agent = createClient(PolicyService, `localhost:${server.ports.policy}`, {
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
        const keyFile = join(base, "new.key");
        await Deno.writeTextFile(keyFile, key, { mode: 0o600 });
        const add = await runner.run("cryptsetup", ["luksAddKey", ...fast, "--key-file=-", image, keyFile], {
          stdin: "unlock",
        });
        assert.ok(add.success, add.stderr);
        await Deno.remove(keyFile);
        await agent.confirmRecoveryKey({ keyId, keySlot: (await slotOpenedBy(runner, image, key))! });
      } finally {
        agent.close();
      }

      const page = await browser.newPage();
      page.setDefaultTimeout(20_000);
      const origin = `https://localhost:${server.ports.web}`;
      await page.goto(`${origin}/disk-encryption`);
      await fill(page, "svc-login-page sl-input[name=username] >>> input", "admin");
      await fill(page, "svc-login-page sl-input[name=password] >>> input", ADMIN_PASSWORD);
      await page.keyboard.press("Enter");
      await page.waitForFunction((u: string) => document.body.innerText.includes(u), {}, uuid);
      const listed = await bodyText(page);
      assert.match(listed, /pc-ui/);
      assert.match(listed, /Escrowed/);
      assert.ok(!listed.includes(key), "the list never shows key material");
      assert.deepEqual(await seriousViolations(page), []);

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
        await fill(page, "svc-disk-reveal-dialog textarea[name=reason]", reason);
        await fill(page, "svc-disk-reveal-dialog input[name=password]", password);
        await page.click("svc-disk-reveal-dialog sl-button[type=submit]");
      };

      // Wrong password: refused, said so, no key.
      await openDialog();
      assert.deepEqual(await seriousViolations(page), []);
      await submit("user locked out", "not-the-password");
      await page.waitForSelector("svc-disk-reveal-dialog p.error", { visible: true });
      assert.match(
        await page.$eval("svc-disk-reveal-dialog p.error", (e) => e.textContent ?? ""),
        /password is wrong/,
      );
      assert.ok(!(await bodyText(page)).includes(key));

      // Right password: the key, a countdown, copy; Hide now removes it.
      await fill(page, "svc-disk-reveal-dialog input[name=password]", ADMIN_PASSWORD);
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
      assert.ok(!(await bodyText(page)).includes(key), "hidden means gone from the page");
      assert.ok(!(await page.content()).includes(key));

      // Second reveal with timers sped up 100×: the key hides itself when the countdown ends.
      await page.evaluate(() => {
        const original = window.setInterval.bind(window);
        window.setInterval = (fn: () => void, ms: number) => original(fn, ms >= 1000 ? ms / 100 : ms);
      });
      await submit("second look", ADMIN_PASSWORD);
      await page.waitForSelector("[data-testid=recovery-key]", { visible: true });
      await page.waitForSelector("[data-testid=recovery-key]", { hidden: true, timeout: 30_000 });
      assert.match(await bodyText(page), /The key is hidden again/);
      assert.ok(!(await page.content()).includes(key));

      const rows = await db.query<{ action: string; outcome: string }>(
        `SELECT action, outcome FROM audit_logs WHERE resource_type = 'luks_volume'
          AND action <> 'disk_encryption.key_confirmed' ORDER BY id`,
      );
      assert.deepEqual(rows.map((r) => [r.action, r.outcome]), [
        // The wrong password: a failed reveal by someone allowed to reveal, not an access denial.
        ["disk_encryption.reveal", "failure"],
        ["disk_encryption.reveal", "success"],
        ["disk_encryption.reveal", "success"],
      ]);
    } finally {
      await browser.close();
      await server.stop();
      await database.dispose();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});
