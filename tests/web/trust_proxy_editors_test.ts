/**
 * The Certificates and Proxy editors.
 *
 * - The Proxy form's catalogue labels every field of the content message and names no other.
 * - The Certificates form's summary (shared reader): subject, expiry, the days left under 30, the rules' words
 *   for a certificate that is not a CA; a DER file is loaded as PEM.
 * - In a real browser (Debian's Chromium driven by puppeteer-core) against a real `svc-server` process: a
 *   Certificates policy built by loading a DER file and a PEM file shows each certificate's subject, OpenSSL's
 *   SHA-256 fingerprint and expiry (an expiring one marked), refuses a server certificate in place naming the
 *   problem, and saves what was loaded.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import type { Page } from "puppeteer-core";
import { ProxyPolicySchema } from "../../shared/gen/svc/policy/v1/proxy_pb.ts";
import { pemBlocks, pemBodyBytes } from "../../shared/x509.ts";
import { proxyEditor } from "../../web/src/editors/proxy.ts";
import { fileAsPem, nameFromFile, summarizeCertificate } from "../../web/src/certificate_summary.ts";
import { browserTest, browserTestSkipped } from "../helpers/browser.ts";
import { withConsoleProcess } from "../helpers/console_login.ts";
import { makeCertificate } from "../helpers/test_ca.ts";
import { catalogueGaps, startNewPolicy } from "../helpers/editor_forms.ts";

Deno.test("Proxy editor: the form's catalogue covers every field and names no other", () => {
  assert.deepEqual(catalogueGaps(proxyEditor.hints.catalogue!.fieldInfo, ProxyPolicySchema), {
    unlabelled: [],
    noField: [],
  });
});

const ROOT = await makeCertificate({ key: "rsa:2048", subject: "/O=Example Corp/CN=Example Corp Root" });
const SOON = await makeCertificate({ key: "ec:P-384", subject: "/CN=Short Lived CA", days: 10 });
const SERVER = await makeCertificate({ ca: false, subject: "/CN=www.example.com" });

Deno.test("Certificates form: summary, expiring days, refusal in the rules' words, DER loaded as PEM", () => {
  const now = new Date();
  const root = summarizeCertificate(ROOT.pem, now);
  assert.ok(typeof root === "object");
  assert.equal(root.subject, "CN=Example Corp Root,O=Example Corp");
  assert.equal(root.notAfter, new X509Certificate(ROOT.pem).validToDate.toISOString().slice(0, 10));
  assert.equal(root.expired, false);
  const soon = summarizeCertificate(SOON.pem, now);
  assert.ok(typeof soon === "object" && soon.daysLeft >= 9 && soon.daysLeft <= 10);
  assert.match(String(summarizeCertificate(SERVER.pem, now)), /is not a CA certificate/);
  const der = pemBodyBytes(pemBlocks(ROOT.pem).blocks[0].body);
  assert.equal(fileAsPem(der), ROOT.pem);
  assert.equal(fileAsPem(new TextEncoder().encode(`\n${ROOT.pem}\n\n`)), ROOT.pem);
  assert.equal(nameFromFile("Corp Root (2024).DER"), "Corp-Root-2024-");
  assert.equal(nameFromFile("../../..crt"), "certificate");
});

const SKIP = browserTestSkipped("Certificates editor browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;

async function load(page: Page, path: string): Promise<void> {
  const input = await page.waitForSelector("svc-certificates-form label.cert-load input[type=file]");
  await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(path);
}

browserTest(
  "Certificates editor: loaded certificates show subject, fingerprint and expiry; a server certificate is refused",
  SKIP,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "svc-certs-ui-" });
    try {
      await Deno.writeFile(`${dir}/corp-root.der`, pemBodyBytes(pemBlocks(ROOT.pem).blocks[0].body));
      await Deno.writeTextFile(`${dir}/short-lived.pem`, SOON.pem);
      await Deno.writeTextFile(`${dir}/www.pem`, SERVER.pem);
      await withConsoleProcess({
        viewport: { width: 1280, height: 1000 },
        failureShot: "certificates-editor",
      }, async ({ server, page, api: adminApi }) => {
        const api = await adminApi();
        const web = server.web;

        await startNewPolicy(page, web, "Certificates", "corp trust");

        await load(page, `${dir}/corp-root.der`);
        await load(page, `${dir}/short-lived.pem`);
        await page.waitForFunction(() =>
          [...document.querySelectorAll("svc-certificates-form .cert-fingerprint")].every((
            e: { textContent: string },
          ) => e.textContent.includes(":")) &&
          document.querySelectorAll("svc-certificates-form .cert-fingerprint").length === 2
        );
        const cards = await page.$$eval(
          "svc-certificates-form fieldset.cert-entry",
          (list) =>
            list.map((f) => ({
              subject: f.querySelector(".cert-subject")?.textContent?.trim(),
              fingerprint: f.querySelector(".cert-fingerprint")?.textContent?.trim(),
              expiry: f.querySelector(".cert-expiry")?.textContent?.replace(/\s+/g, " ").trim(),
              expiring: f.querySelector(".cert-expiring") !== null,
              name: (f.querySelector("sl-input") as unknown as { value: string }).value,
            })),
        );
        assert.deepEqual(cards.map((c) => c.name), ["corp-root", "short-lived"]);
        assert.equal(cards[0].subject, "CN=Example Corp Root,O=Example Corp");
        assert.equal(cards[0].fingerprint, new X509Certificate(ROOT.pem).fingerprint256);
        assert.equal(cards[1].fingerprint, new X509Certificate(SOON.pem).fingerprint256);
        assert.equal(cards[0].expiring, false);
        assert.match(cards[1].expiry!, /^\d{4}-\d{2}-\d{2} \(in (9|10) days\)$/);
        assert.ok(cards[1].expiring);

        await load(page, `${dir}/www.pem`);
        await page.waitForSelector('svc-certificates-form fieldset[data-index="2"] .cert-problem', {
          visible: true,
        });
        assert.match(
          await page.$eval(
            'svc-certificates-form fieldset[data-index="2"] .cert-problem',
            (e) => e.textContent ?? "",
          ),
          /is not a CA certificate \(CN=www.example.com: basicConstraints cA is false\)/,
        );
        await page.waitForFunction(() =>
          /problem/.test(document.querySelector(".validation-summary")?.textContent ?? "")
        );
        await page.click('svc-certificates-form fieldset[data-index="2"] sl-button.cert-remove');
        await page.waitForFunction(() =>
          document.querySelector(".validation-summary")?.textContent?.includes("No problems")
        );
        await page.click("sl-button.save-policy");
        await page.waitForFunction(() => /^\/policies\/[0-9a-f-]{36}\/edit$/.test(location.pathname));
        const id = new URL(page.url()).pathname.split("/")[2];
        const saved = JSON.parse((await api.call("GET", `/api/v1/policies/all/${id}`)).content);
        assert.deepEqual(saved.certificates.map((c: { name: string }) => c.name), [
          "corp-root",
          "short-lived",
        ]);
        assert.equal(saved.certificates[0].pem, ROOT.pem);
      });
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
);
