/**
 * The deploy-agent wizard in a real browser (Debian's Chromium, puppeteer-core) against the real server
 * serving an agent repository: the masthead entry opens the wizard; the Debian script embeds this server's
 * CA and repository key with a deb822 `Signed-By` source; Fedora's uses `repo_gpgcheck=1`; the enrollment
 * step creates a fresh token for the chosen node group and the script carries it; the downloads tab lists
 * the manifest's files. The script's text itself is run for real by tests/e2e/install_test.ts.
 */
import assert from "node:assert/strict";
import { browserTestSkipped } from "../helpers/browser.ts";
import { callApi, startConsoleServer, withConsole } from "../helpers/console_login.ts";
import { FAKE_REPO_KEY, writeAgentRepo } from "../helpers/agent_repo.ts";
import { VERSION } from "../../shared/version.ts";

const SKIP = browserTestSkipped("deploy-agent wizard test");

// deno-lint-ignore no-explicit-any
declare const document: any;

/** A small repository as `deno task build` lays one out (one deb, one apk). */
function repo(): Promise<string> {
  return writeAgentRepo({
    files: {
      "repo-key.asc": FAKE_REPO_KEY,
      "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb": "deb",
      "apk/svc-agent-1-r1.x86_64.apk": "apk",
    },
    packages: [
      { path: "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb", format: "deb", arch: "amd64" },
      { path: "apk/svc-agent-1-r1.x86_64.apk", format: "apk", arch: "x86_64" },
    ],
    buildLocal: true,
  });
}

Deno.test({
  name:
    "deploy-agent wizard in Chromium: script with CA and key, Fedora variant, enrollment token, downloads",
  ignore: SKIP,
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const repoDir = await repo();
  try {
    const server = await startConsoleServer({ settings: { "agent_repo.dir": repoDir } });
    await withConsole(server, { path: "/nodes" }, async ({ page, watch }) => {
      const base = server.web;
      await page.waitForSelector("svc-app .masthead svc-deploy-agent sl-button", { visible: true });
      // The nodes page offers the wizard too.
      await page.waitForSelector("svc-nodes-page svc-deploy-agent sl-button", { visible: true });
      // A node group for the enrollment step, created through the API as the app does.
      assert.equal(
        (await callApi(page, "POST", "/api/v1/node-groups", { name: "wizard group" })).status,
        201,
      );

      await page.click("svc-app .masthead svc-deploy-agent sl-button");
      await page.waitForSelector("#deploy-agent-script", { visible: true });
      const scriptText = () =>
        page.$eval("#deploy-agent-script", (el: { textContent: string }) => el.textContent);
      let script = await scriptText();
      assert.match(script, new RegExp(`^URIs: ${base.replaceAll(".", "\\.")}/agent/deb$`, "m"));
      assert.match(script, /^Signed-By: \/etc\/apt\/keyrings\/svc-agent\.asc$/m);
      assert.ok(
        script.includes(server.running.ctx.ca.certPem.trim().split("\n")[1]),
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
      assert.match(script, new RegExp(`policy_port: ${server.running.ports.policy}/`));

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

      /** Reloads the page, opens the wizard again once `shows` is in it, and answers the text of `read`. */
      const reopened = async (shows: string, read = shows) => {
        await page.reload({ waitUntil: "load" });
        await page.waitForSelector("svc-app .masthead svc-deploy-agent sl-button", { visible: true });
        await page.click("svc-app .masthead svc-deploy-agent sl-button");
        await page.waitForSelector(shows);
        return await page.$eval(read, (el: { textContent: string }) => el.textContent.replace(/\s+/g, " "));
      };

      // A repository of another version is served, but the wizard says so.
      const manifest = JSON.parse(await Deno.readTextFile(`${repoDir}/manifest.json`));
      await Deno.writeTextFile(`${repoDir}/manifest.json`, JSON.stringify({ ...manifest, version: "9.9.9" }));
      const warning = await reopened("svc-deploy-agent .agent-version-mismatch");
      assert.match(
        warning,
        new RegExp(`serves agent 9\\.9\\.9, but this server is ${VERSION.replaceAll(".", "\\.")}`),
      );

      // Without packages the repository is disabled: the wizard says no repository is installed and how
      // to install one, and offers no script.
      await Deno.remove(`${repoDir}/manifest.json`);
      const missing = await reopened("svc-deploy-agent .agent-repo-missing", "svc-deploy-agent sl-dialog");
      assert.match(missing, /No agent repository is installed on this server/);
      assert.match(missing, /apt install svc-agent-repo/);
      assert.match(missing, /install the svc-agent-repo package/, "with the server's own reason");
      assert.equal(await page.$("svc-deploy-agent sl-tab-group"), null, "no install script to copy");
      assert.deepEqual(watch.pageErrors, []);
    });
  } finally {
    await Deno.remove(repoDir, { recursive: true }).catch(() => {});
  }
});
