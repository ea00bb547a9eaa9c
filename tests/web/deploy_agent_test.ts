/**
 * The deploy-agent wizard in a real browser (Debian's Chromium, puppeteer-core) against the real server
 * serving an agent repository: the masthead entry opens the wizard; the Debian script embeds this server's
 * CA and repository key with a deb822 `Signed-By` source; Fedora's uses `repo_gpgcheck=1`; the enrollment
 * step creates a fresh token for the chosen node group and the script carries it; the downloads tab lists
 * the manifest's files. The script's text itself is run for real by tests/e2e/install_test.ts.
 */
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";
import { resolveConfig } from "../../server/config/config.ts";
import { startServer } from "../../server/server.ts";
import { createLogger } from "../../server/core/log.ts";
import { localServerSettings } from "../helpers/process.ts";
import { freshDb } from "../helpers/db.ts";
import { VERSION } from "../../shared/version.ts";

const CHROMIUM = "/usr/bin/chromium";
const ADMIN_PASSWORD = "Admin-Passw0rd-for-deploy-tests";
const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);
if (!haveChromium) {
  console.log("skipped: the deploy-agent wizard test needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;

/** A small repository as `deno task build` lays one out (one deb, one apk). */
async function repo(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "svc-deploy-ui-repo-" });
  const files: Record<string, string> = {
    "repo-key.asc":
      "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBFAKEKEY\n-----END PGP PUBLIC KEY BLOCK-----\n",
    "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb": "deb",
    "apk/svc-agent-1-r1.x86_64.apk": "apk",
  };
  const list = [];
  for (const [path, text] of Object.entries(files)) {
    await Deno.mkdir(`${dir}/${path.slice(0, path.lastIndexOf("/") + 1) || "."}`, { recursive: true });
    await Deno.writeTextFile(`${dir}/${path}`, text);
    list.push({ path, sha256: "0".repeat(64), size: text.length });
  }
  await Deno.writeTextFile(
    `${dir}/manifest.json`,
    JSON.stringify({
      version: VERSION,
      signed: true,
      signing_key: { fingerprint: "X", build_local: true, label: "build-local" },
      arches: ["amd64", "arm64"],
      packages: [
        { path: "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb", format: "deb", arch: "amd64" },
        { path: "apk/svc-agent-1-r1.x86_64.apk", format: "apk", arch: "x86_64" },
      ],
      files: list,
    }),
  );
  return dir;
}

Deno.test({
  name:
    "deploy-agent wizard in Chromium: script with CA and key, Fedora variant, enrollment token, downloads",
  ignore: !haveChromium,
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "svc-deploy-ui-" });
  const repoDir = await repo();
  const config = resolveConfig(
    localServerSettings(dataDir, {
      "security.admin_password": ADMIN_PASSWORD,
      "agent_repo.dir": repoDir,
    }),
    {},
  );
  const database = await freshDb("pglite");
  const server = await startServer(config, { db: database.db, log: createLogger("warn") });
  const profile = await Deno.makeTempDir({ prefix: "svc-deploy-ui-chromium-" });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      `--user-data-dir=${profile}`,
      "--ignore-certificate-errors",
    ],
  });
  const base = `https://localhost:${server.ports.web}`;
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(20_000);
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(String(err)));
    await page.goto(`${base}/nodes`, { waitUntil: "load" });
    await page.waitForSelector("svc-login-page sl-input[name=username]", { visible: true });
    for (const [name, value] of [["username", "admin"], ["password", ADMIN_PASSWORD]]) {
      await page.evaluate(
        (n: string, v: string) => {
          const input = document.querySelector(`svc-login-page sl-input[name=${n}]`);
          input.value = v;
          input.dispatchEvent(new Event("sl-input", { bubbles: true }));
        },
        name,
        value,
      );
    }
    await page.keyboard.press("Enter");
    await page.waitForSelector("svc-app .masthead svc-deploy-agent sl-button", { visible: true });
    // The nodes page offers the wizard too.
    await page.waitForSelector("svc-nodes-page svc-deploy-agent sl-button", { visible: true });
    // A node group for the enrollment step, created through the API as the app does.
    await page.evaluate(async () => {
      const csrf = document.cookie.split("; ").find((c: string) => c.startsWith("svc_csrf="))!.slice(9);
      await fetch("/api/v1/node-groups", {
        method: "POST",
        headers: { "content-type": "application/json", "x-csrf-token": decodeURIComponent(csrf) },
        body: JSON.stringify({ name: "wizard group" }),
      });
    });

    await page.click("svc-app .masthead svc-deploy-agent sl-button");
    await page.waitForSelector("#deploy-agent-script", { visible: true });
    const scriptText = () =>
      page.$eval("#deploy-agent-script", (el: { textContent: string }) => el.textContent);
    let script = await scriptText();
    assert.match(script, new RegExp(`^URIs: ${base.replaceAll(".", "\\.")}/agent/deb$`, "m"));
    assert.match(script, /^Signed-By: \/etc\/apt\/keyrings\/svc-agent\.asc$/m);
    assert.ok(
      script.includes(server.ctx.ca.certPem.trim().split("\n")[1]),
      "the script embeds the server's CA",
    );
    assert.ok(script.includes("mQENBFAKEKEY"), "the script embeds the repository key");
    assert.match(script, /^apt-get install -y svc-agent$/m);

    // Fedora / RHEL: dnf with repository metadata signature checks.
    await page.evaluate(() => {
      const select = document.querySelector("svc-deploy-agent sl-dialog sl-select");
      select.value = "fedora";
      select.dispatchEvent(new Event("sl-change", { bubbles: true }));
    });
    await page.waitForFunction(() =>
      document.querySelector("#deploy-agent-script")?.textContent.includes("repo_gpgcheck=1")
    );
    script = await scriptText();
    assert.match(script, /^dnf install -y svc-agent$/m);

    // Enrollment: a fresh token for the chosen group ends up in the script.
    await page.evaluate(() => {
      const box = document.querySelector("svc-deploy-agent sl-dialog sl-checkbox");
      box.checked = true;
      box.dispatchEvent(new Event("sl-change", { bubbles: true }));
    });
    const button = await page.waitForFunction(() =>
      [...document.querySelectorAll("svc-deploy-agent sl-dialog sl-button")].find((
        b: { textContent: string },
      ) => b.textContent.includes("Create token")) ?? null
    );
    await page.waitForFunction(() =>
      document.querySelector("svc-deploy-agent sl-dialog sl-select:nth-of-type(1)") !== null
    );
    await button.asElement()!.click();
    await page.waitForFunction(() =>
      document.querySelector("#deploy-agent-script")?.textContent.includes(
        "--token-file /etc/svc/enrollment-token",
      )
    );
    script = await scriptText();
    const token = /printf '%s\\n' '([^']+)' > \/etc\/svc\/enrollment-token/.exec(script)?.[1];
    assert.ok(token && token.length >= 20, `a token in the script:\n${script}`);
    assert.match(script, /^systemctl enable --now svc-agent$/m);
    assert.match(script, new RegExp(`policy_port: ${server.ports.policy}/`));

    // Downloads: every file of the manifest.
    await page.evaluate(() => document.querySelector("svc-deploy-agent sl-tab[panel=files]").click());
    await page.waitForFunction(() =>
      document.querySelectorAll("svc-deploy-agent table.deploy-files tbody tr").length === 3
    );
    const links = await page.$$eval(
      "svc-deploy-agent table.deploy-files a[download]",
      (as: Array<{ getAttribute(n: string): string }>) => as.map((a) => a.getAttribute("href")),
    );
    assert.deepEqual(links.sort(), [
      "/agent/apk/svc-agent-1-r1.x86_64.apk",
      "/agent/deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb",
      "/agent/repo-key.asc",
    ]);

    // A repository of another version is served, but the wizard says so.
    const manifest = JSON.parse(await Deno.readTextFile(`${repoDir}/manifest.json`));
    await Deno.writeTextFile(`${repoDir}/manifest.json`, JSON.stringify({ ...manifest, version: "9.9.9" }));
    await page.reload({ waitUntil: "load" });
    await page.waitForSelector("svc-app .masthead svc-deploy-agent sl-button", { visible: true });
    await page.click("svc-app .masthead svc-deploy-agent sl-button");
    await page.waitForSelector("svc-deploy-agent .agent-version-mismatch");
    const warning = await page.$eval(
      "svc-deploy-agent .agent-version-mismatch",
      (el: { textContent: string }) => el.textContent.replace(/\s+/g, " "),
    );
    assert.match(
      warning,
      new RegExp(`serves agent 9\\.9\\.9, but this server is ${VERSION.replaceAll(".", "\\.")}`),
    );

    // Without packages the repository is disabled: the wizard says no repository is installed and how
    // to install one, and offers no script.
    await Deno.remove(`${repoDir}/manifest.json`);
    await page.reload({ waitUntil: "load" });
    await page.waitForSelector("svc-app .masthead svc-deploy-agent sl-button", { visible: true });
    await page.click("svc-app .masthead svc-deploy-agent sl-button");
    await page.waitForSelector("svc-deploy-agent .agent-repo-missing");
    const missing = await page.$eval(
      "svc-deploy-agent sl-dialog",
      (el: { textContent: string }) => el.textContent.replace(/\s+/g, " "),
    );
    assert.match(missing, /No agent repository is installed on this server/);
    assert.match(missing, /apt install svc-agent-repo/);
    assert.match(missing, /install the svc-agent-repo package/, "with the server's own reason");
    assert.equal(await page.$("svc-deploy-agent sl-tab-group"), null, "no install script to copy");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await server.stop();
    await database.dispose();
    for (const d of [profile, dataDir, repoDir]) await Deno.remove(d, { recursive: true }).catch(() => {});
  }
});
