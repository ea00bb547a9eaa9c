/**
 * The console's unfinished corners (issue 33, "Broken"), in a real browser (Debian's Chromium) against a real
 * `svc-server` process serving an agent repository:
 *
 * - the deploy-agent wizard opened from the masthead is readable: every piece of its text has a WCAG
 *   contrast of at least 4.5:1 against what is behind it (computed colours), in the light and dark theme;
 * - the SessionAccess week has day cells with height and red "nobody may log in" bars;
 * - `data-table` tables, the disk-encryption summary cards and the key-reveal dialog are styled, and files
 *   are chosen with a styled picker, not the browser's "Choose File";
 * - axe-core finds nothing at all (minor to critical) on the wizard, TOTP enrolment, every Settings tab,
 *   the confirm dialog and a read-only multi-select;
 * - a confirm dialog takes the focus and gives it back; leaving a changed editor through the sidebar asks
 *   first and keeps the changes when cancelled; an Auditor at `/policies/new` reads why they cannot create;
 * - the lockout guard's dialog, enum choices and validation messages speak human (no `lockout_reason`,
 *   `%group`, "Unspecified" or `SESSION_ACCESS_EFFECT_ALLOW`); a 403 names the roles that would allow it;
 * - the GVariant field type-checks as one types with the shared parser (`uint32 -5`, `[1, 'a']` refused).
 *
 * Screenshots go to `test-artifacts/console-polish/`.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import {
  axeViolations,
  browserTest,
  browserTestSkipped,
  screenshot,
  toastsSettled,
} from "../helpers/browser.ts";
import { openConsoleLoggedIn, withConsoleProcess } from "../helpers/console_login.ts";
import { contrastOf } from "../helpers/contrast.ts";
import { VERSION } from "../../shared/version.ts";

const SKIP = browserTestSkipped("console polish browser test");

const AUDITOR_PASSWORD = "Auditor-Passw0rd-for-polish";
const EDITOR_PASSWORD = "Editor-Passw0rd-for-polish";

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const localStorage: any;
// deno-lint-ignore no-explicit-any
declare const location: any;
// deno-lint-ignore no-explicit-any
declare function getComputedStyle(el: any): any;
// deno-lint-ignore no-explicit-any
type El = any;

const shot = (page: Page, name: string) => screenshot(page, "console-polish", name);

/** A small repository as `deno task build` lays one out, for the wizard. */
async function agentRepo(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "svc-polish-repo-" });
  const files: Record<string, string> = {
    "repo-key.asc":
      "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBFAKEKEY\n-----END PGP PUBLIC KEY BLOCK-----\n",
    "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb": "deb",
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
      signing_key: { fingerprint: "X", build_local: false, label: "release" },
      arches: ["amd64"],
      packages: [{ path: "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb", format: "deb", arch: "amd64" }],
      files: list,
    }),
  );
  return dir;
}

/**
 * The text a person can read or hear under `selector`: text of the light and shadow trees, and the
 * attributes that become visible text (help text, labels, placeholders, tooltips).
 */
async function readableText(page: Page, selector: string): Promise<string> {
  return await page.$eval(selector, (root: El) => {
    const parts: string[] = [];
    const visit = (node: El) => {
      for (const child of node.childNodes) {
        if (child.nodeType === 3) parts.push(child.textContent);
        else if (child.nodeType === 1) {
          if (["STYLE", "SCRIPT"].includes(child.tagName)) continue;
          for (const a of ["help-text", "label", "placeholder", "title", "aria-label"]) {
            if (child.getAttribute(a)) parts.push(child.getAttribute(a));
          }
          visit(child);
          if (child.shadowRoot) visit(child.shadowRoot);
        }
      }
    };
    visit(root);
    return parts.join(" ").replace(/\s+/g, " ");
  });
}

/** The innermost focused element across shadow roots, described by tag and classes. */
async function deepFocus(page: Page): Promise<{ path: string[] }> {
  return await page.evaluate(() => {
    const path: string[] = [];
    let el = document.activeElement;
    while (el) {
      path.push(
        `${el.tagName.toLowerCase()}${el.className ? `.${String(el.className).split(" ").join(".")}` : ""}`,
      );
      el = el.shadowRoot?.activeElement ?? null;
    }
    return { path };
  });
}

/** Axe findings of every impact, waiting first for toasts between open and gone (their hide animation). */
async function axeAll(page: Page): Promise<unknown[]> {
  await toastsSettled(page);
  return await axeViolations(page);
}

/** Sets a Shoelace control's value the way a person's choice does (value, then `sl-change`/`sl-input`). */
async function setControl(page: Page, selector: string, value: unknown, event = "sl-change"): Promise<void> {
  await page.waitForSelector(selector);
  await page.$eval(
    selector,
    (el: El, v: unknown, ev: string) => {
      el.value = v;
      el.dispatchEvent(new Event(ev, { bubbles: true, composed: true }));
    },
    value,
    event,
  );
}

browserTest(
  "console polish: readable wizard, styled corners, axe clean, focus, guards and human messages",
  SKIP,
  async (t) => {
    const repoDir = await agentRepo();
    try {
      await withConsoleProcess({
        server: { config: { agent_repo: { dir: repoDir } } },
        path: false,
        viewport: { width: 1440, height: 900 },
      }, async ({ server, browser, page, watch, logIn, api: adminApi }) => {
        const api = await adminApi();
        const adminPassword = server.adminPassword;
        const web = server.web;

        // Seed: a node group, SessionAccess policies (one released, one draft bound to the group), a Firefox
        // draft, a Dconf draft with a key the catalogue does not know, an Auditor and a Policy Editor.
        const lab = await api.call("POST", "/api/v1/node-groups", { name: "lab" });
        const officeRules = {
          time_zone: "UTC",
          rules: [{
            users: ["alice"],
            groups: ["support"],
            effect: "SESSION_ACCESS_EFFECT_ALLOW",
            windows: [{
              days: [
                "WEEKDAY_MONDAY",
                "WEEKDAY_TUESDAY",
                "WEEKDAY_WEDNESDAY",
                "WEEKDAY_THURSDAY",
                "WEEKDAY_FRIDAY",
              ],
              start: "09:00",
              end: "17:00",
            }],
          }],
        };
        const office = await api.call("POST", "/api/v1/policies/all", {
          name: "Office hours",
          type: "SessionAccess",
          content: JSON.stringify(officeRules),
        });
        await api.call("PUT", `/api/v1/policies/all/${office.id}/state`, { state: "released" });
        const labHours = await api.call("POST", "/api/v1/policies/all", {
          name: "Lab hours",
          type: "SessionAccess",
          content: JSON.stringify(officeRules),
        });
        await api.call("POST", "/api/v1/policy-bindings", { policy_id: labHours.id, node_group_id: lab.id });
        const browserPolicy = await api.call("POST", "/api/v1/policies/all", {
          name: "Browser basics",
          type: "Firefox",
          content: JSON.stringify({ DisableTelemetry: true }),
        });
        const dconf = await api.call("POST", "/api/v1/policies/all", {
          name: "Desktop tweaks",
          type: "Dconf",
          content: JSON.stringify({
            entries: [{ schema_id: "org.example.unknown", key: "answer", value: "42" }],
          }),
        });
        const roles = await api.call("GET", "/api/v1/roles?per_page=100");
        const roleId = (name: string) => roles.items.find((r: { name: string }) => r.name === name).id;
        const auditor = await api.call("POST", "/api/v1/users", {
          username: "auditor",
          password: AUDITOR_PASSWORD,
        });
        await api.call("POST", `/api/v1/users/${auditor.id}/role-bindings`, {
          role_id: roleId("Auditor"),
          step_up: { password: adminPassword },
        });
        const editor = await api.call("POST", "/api/v1/users", {
          username: "editor",
          password: EDITOR_PASSWORD,
        });
        const editorBinding = await api.call("POST", `/api/v1/users/${editor.id}/role-bindings`, {
          role_id: roleId("Policy Editor"),
          step_up: { password: adminPassword },
        });

        // Leaving an editor with changes by reloading asks the browser's own question; the test says leave.
        page.on("dialog", (dialog) => void dialog.accept());
        await logIn({ path: "/nodes" });
        // A failing step leaves a screenshot of every page where it stopped.
        const step = (name: string, fn: () => Promise<void>) =>
          t.step(name, async () => {
            try {
              await fn();
            } catch (err) {
              // The browser's first tab stays blank in the background, where a screenshot would wait forever.
              const pages = (await browser.pages()).filter((p) => p.url() !== "about:blank");
              for (const [i, p] of pages.entries()) {
                await shot(p, `failed-${name.slice(0, 40).replace(/[^a-z0-9]+/gi, "-")}-${i}`).catch(
                  () => {},
                );
              }
              throw err;
            }
          });

        await step("the deploy-agent wizard is readable in both themes and axe-clean", async () => {
          for (const theme of ["light", "dark"]) {
            await page.evaluate((th: string) => localStorage.setItem("svc-theme", th), theme);
            await page.reload({ waitUntil: "domcontentloaded" });
            const button = await page.waitForSelector("svc-app .masthead svc-deploy-agent sl-button", {
              visible: true,
            });
            await button!.click();
            await page.waitForSelector("#deploy-agent-script", { visible: true });
            // Measured once the dialog has finished opening (its panel fully opaque and in place).
            await page.waitForFunction(() => {
              const panel = document.querySelector("svc-deploy-agent sl-dialog")?.shadowRoot
                ?.querySelector("[part~=panel]");
              if (!panel) return false;
              const style = getComputedStyle(panel);
              return style.opacity === "1" && ["none", "matrix(1, 0, 0, 1, 0, 0)"].includes(style.transform);
            }, { polling: 250 });
            const texts = await contrastOf(page, "svc-deploy-agent sl-dialog");
            assert.ok(texts.some((x) => x.text.startsWith("Deploy agent")), JSON.stringify(texts));
            assert.ok(texts.some((x) => x.text.includes("Distribution")), JSON.stringify(texts));
            assert.ok(texts.some((x) => x.text.startsWith("#!/bin/sh")), "the script is measured");
            const poor = texts.filter((x) => !(x.ratio >= 4.5));
            assert.deepEqual(poor, [], `text under 4.5:1 in the ${theme} theme`);
            await shot(page, `wizard-${theme}`);
            assert.deepEqual(await axeAll(page), [], `axe on the wizard (${theme})`);
          }
          await page.evaluate(() => localStorage.setItem("svc-theme", "light"));
        });

        await step(
          "the agent repository's state is asked once per page load; pages load as chunks",
          async () => {
            const asked: string[] = [];
            const scripts: string[] = [];
            const onRequest = (req: { url(): string }) => {
              const path = new URL(req.url()).pathname;
              if (path === "/api/v1/agent-repo") asked.push(req.url());
              if (path.startsWith("/assets/") && path.endsWith(".js")) scripts.push(path);
            };
            page.on("request", onRequest);
            await page.goto(`${web}/nodes`, { waitUntil: "domcontentloaded" });
            await page.waitForSelector("svc-nodes-page svc-deploy-agent sl-button", { visible: true });
            // Split by route: the first screen came with the nodes page's chunk, not the policy editor's (the
            // other pages follow in the background a while later).
            const firstScreen = [...scripts];
            assert.ok(firstScreen.some((p) => p.startsWith("/assets/nodes-")), firstScreen.join(" "));
            assert.ok(
              !firstScreen.some((p) => p.startsWith("/assets/policy_editor-")),
              firstScreen.join(" "),
            );
            for (const href of ["/", "/nodes", "/policies", "/nodes"]) {
              await page.click(`nav#main-nav a[href='${href}']`);
              await page.waitForFunction((p: string) => location.pathname === p, { polling: 250 }, href);
            }
            await page.waitForSelector("svc-nodes-page svc-deploy-agent sl-button", { visible: true });
            page.off("request", onRequest);
            assert.equal(asked.length, 1, asked.join("\n"));
          },
        );

        await step("the SessionAccess week: day cells with height, red lockout hours", async () => {
          await page.goto(`${web}/policies/${office.id}/edit`, { waitUntil: "domcontentloaded" });
          await page.waitForSelector("svc-session-timeline .session-locked");
          const cells = await page.$$eval(
            "svc-session-timeline .session-day",
            (days: El[]) =>
              days.map((d) => {
                const r = d.getBoundingClientRect();
                return { width: r.width, height: r.height };
              }),
          );
          assert.ok(cells.length >= 14, `two rows of seven days: ${cells.length}`);
          for (const c of cells) {
            assert.ok(c.width >= 24 && c.height >= 12, `a day cell is visible: ${JSON.stringify(c)}`);
          }
          const bars = await page.$$eval(
            "svc-session-timeline .session-locked",
            (spans: El[]) =>
              spans.map((s) => {
                const r = s.getBoundingClientRect();
                const cell = s.parentElement.getBoundingClientRect();
                return {
                  width: r.width,
                  height: r.height,
                  inside: r.top >= cell.top - 0.5 && r.bottom <= cell.bottom + 0.5 &&
                    r.left >= cell.left - 0.5 &&
                    r.right <= cell.right + 0.5,
                  colour: getComputedStyle(s).backgroundColor,
                };
              }),
          );
          assert.ok(bars.length >= 7, "Saturday, Sunday and the nights are marked");
          for (const b of bars) {
            assert.ok(
              b.width > 0 && b.height >= 8 && b.inside,
              `a lockout bar shows in its day: ${JSON.stringify(b)}`,
            );
            const [r, g, bl] = b.colour.match(/\d+(\.\d+)?/g).map(Number);
            assert.ok(r > g + 60 && r > bl + 60, `a lockout bar is red: ${b.colour}`);
          }
          const allowed = await page.$$eval(
            "svc-session-timeline .session-allowed",
            (spans: El[]) =>
              spans.map((s) => ({
                height: s.getBoundingClientRect().height,
                colour: getComputedStyle(s).backgroundColor,
              })),
          );
          assert.ok(allowed.length >= 5 && allowed.every((a) => a.height >= 8), JSON.stringify(allowed));
          assert.deepEqual(
            await page.$$eval(
              "svc-session-timeline th[scope=row]",
              (ths: El[]) => ths.map((th) => th.textContent.trim()),
            ),
            ["alice", "group support"],
            "a group reads as a group, not %support",
          );
          await shot(page, "session-week");
        });

        await step(
          "enum choices never offer Unspecified nor show proto names; read-only multi-select is axe-clean",
          async () => {
            await page.waitForSelector("svc-session-access-form sl-select sl-option");
            const options = await page.$$eval(
              "svc-session-access-form sl-select sl-option",
              (os: El[]) => os.map((o) => o.textContent.replace(/\s+/g, " ").trim()),
            );
            assert.ok(options.some((o) => o.startsWith("Monday")), JSON.stringify(options));
            assert.deepEqual(options.filter((o) => /unspecified/i.test(o)), []);
            assert.deepEqual(
              options.filter((o) => /[A-Z]+_[A-Z_]+/.test(o)),
              [],
              "no proto constant in a choice",
            );
            // The weekdays of the released policy are a disabled multi-select with tags.
            await page.waitForSelector("svc-session-access-form sl-select[multiple][disabled]");
            assert.deepEqual(await axeAll(page), [], "axe on a released SessionAccess policy");
          },
        );

        await step("validation messages name enum values by label, never by proto constant", async () => {
          await page.goto(`${web}/policies/${labHours.id}/edit`, { waitUntil: "domcontentloaded" });
          await page.waitForSelector("svc-policy-editor-page sl-tab[panel=json]");
          await page.click("svc-policy-editor-page sl-tab[panel=json]");
          const noEffect = { ...officeRules, rules: [{ ...officeRules.rules[0], effect: undefined }] };
          await setControl(page, "svc-policy-editor-page sl-textarea.json-view", JSON.stringify(noEffect));
          await page.waitForFunction(
            () =>
              document.querySelector("svc-policy-editor-page .validation-summary")?.textContent.includes(
                "problem",
              ),
            { polling: 250 },
          );
          const text = await readableText(page, "svc-policy-editor-page");
          assert.match(text, /effect/i);
          assert.match(text, /Allow/);
          assert.doesNotMatch(text, /SESSION_ACCESS_EFFECT_[A-Z]+/);
          await page.click("svc-policy-editor-page sl-tab[panel=form]");
          // The week below the form asks the server, whose refusal of the rules names the constant too.
          await page.waitForSelector("svc-session-timeline sl-alert.form-error");
          const formText = await readableText(page, "svc-policy-editor-page svc-session-access-form");
          assert.deepEqual(
            formText.match(/\b[A-Z]+_[A-Z]+_[A-Z_]+\b/g),
            null,
            "no proto constant in the form",
          );
          assert.doesNotMatch(formText, /Unspecified/i);
        });

        await step("the lockout guard's dialog speaks human", async () => {
          await page.goto(`${web}/policies/${labHours.id}/edit`, { waitUntil: "domcontentloaded" });
          const release = await page.waitForSelector("svc-policy-editor-page sl-button.state-released", {
            visible: true,
          });
          await release!.click();
          const ok = await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
          await ok!.click();
          await page.waitForSelector("svc-session-lockout-dialog .lockout-message", { visible: true });
          const text = await readableText(page, "svc-session-lockout-dialog");
          assert.doesNotMatch(text, /lockout_reason/);
          assert.doesNotMatch(text, /%support/);
          assert.match(text, /lab/);
          assert.match(text, /alice/);
          assert.match(text, /group support/);
          assert.match(text, /Mon 17:00–Tue 09:00/);
          await shot(page, "lockout-dialog");
          assert.deepEqual(await axeAll(page), [], "axe on the lockout dialog");
          await page.click("svc-session-lockout-dialog sl-button:not(.lockout-confirm)");
          await page.waitForSelector("svc-session-lockout-dialog", { hidden: true });
        });

        await step("a confirm dialog takes the focus and gives it back", async () => {
          await page.goto(`${web}/policies/${browserPolicy.id}/edit`, { waitUntil: "domcontentloaded" });
          const release = await page.waitForSelector("svc-policy-editor-page sl-button.state-released", {
            visible: true,
          });
          await release!.click();
          await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
          await page.waitForFunction(() => document.activeElement?.closest("svc-confirm-dialog") != null, {
            polling: 250,
          });
          const inside = await deepFocus(page);
          assert.ok(
            inside.path.some((p) =>
              p.startsWith("sl-button") || p.startsWith("button") || p.startsWith("input")
            ),
            `focus is on a control of the dialog: ${inside.path.join(" > ")}`,
          );
          assert.deepEqual(await axeAll(page), [], "axe on the confirm dialog");
          await page.keyboard.press("Escape");
          await page.waitForSelector("svc-confirm-dialog", { hidden: true });
          await page.waitForFunction(() => document.activeElement?.classList.contains("state-released"), {
            polling: 250,
          });
        });

        await step(
          "leaving a changed editor through the sidebar asks first and keeps the changes",
          async () => {
            await page.goto(`${web}/policies/${browserPolicy.id}/edit`, { waitUntil: "domcontentloaded" });
            const name = await page.waitForSelector("svc-policy-editor-page sl-input[name=name] >>> input", {
              visible: true,
            });
            await name!.click({ count: 3 });
            await name!.type("Browser basics v2");
            await page.click("nav#main-nav a[href='/nodes']");
            await page.waitForSelector("svc-confirm-dialog sl-button.confirm-cancel", { visible: true });
            assert.match(await readableText(page, "svc-confirm-dialog"), /unsaved|not saved/i);
            await page.click("svc-confirm-dialog sl-button.confirm-cancel");
            await page.waitForSelector("svc-confirm-dialog", { hidden: true });
            assert.equal(await page.evaluate(() => location.pathname), `/policies/${browserPolicy.id}/edit`);
            assert.equal(
              await page.$eval("svc-policy-editor-page sl-input[name=name]", (e: El) => e.value),
              "Browser basics v2",
            );
            await page.click("nav#main-nav a[href='/nodes']");
            const leave = await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", {
              visible: true,
            });
            await leave!.click();
            await page.waitForFunction(() => location.pathname === "/nodes", { polling: 250 });
            await page.waitForSelector("svc-nodes-page");
          },
        );

        await step("the GVariant field type-checks as one types with the shared parser", async () => {
          await page.goto(`${web}/policies/${dconf.id}/edit`, { waitUntil: "domcontentloaded" });
          const input = await page.waitForSelector("svc-dconf-form sl-input.dconf-gvariant >>> input", {
            visible: true,
          });
          const helpAfterTyping = async (text: string) => {
            await input!.click({ count: 3 });
            await page.keyboard.press("Backspace");
            await input!.type(text);
            // No blur: the check runs as one types.
            return await page.$eval("svc-dconf-form sl-input.dconf-gvariant", (e: El) => ({
              help: e.getAttribute("help-text") ?? e.helpText ?? "",
              error: e.classList.contains("has-error"),
            }));
          };
          const negative = await helpAfterTyping("uint32 -5");
          assert.ok(negative.error, JSON.stringify(negative));
          assert.match(negative.help, /out of range/);
          const mixed = await helpAfterTyping("[1, 'a']");
          assert.ok(mixed.error, JSON.stringify(mixed));
          assert.match(mixed.help, /string/);
          for (const good of ["uint32 5", "@as []", "[]", "('a', 1)"]) {
            const fine = await helpAfterTyping(good);
            assert.ok(!fine.error && fine.help === "", `${good}: ${JSON.stringify(fine)}`);
          }
        });

        await step(
          "data-table tables, summary cards, the reveal dialog and the file pickers are styled",
          async () => {
            await page.goto(`${web}/settings?tab=api-tokens`, { waitUntil: "domcontentloaded" });
            await page.waitForSelector("svc-settings-api-tokens table.data-table");
            const tableLook = (sel: string) =>
              page.$eval(sel, (table: El) => {
                const th = table.querySelector("thead th");
                const cell = table.querySelector("tbody td, tbody th");
                return {
                  collapse: getComputedStyle(table).borderCollapse,
                  width: table.getBoundingClientRect().width /
                    table.parentElement.getBoundingClientRect().width,
                  headPadding: parseFloat(getComputedStyle(th).paddingLeft),
                  cellPadding: parseFloat(getComputedStyle(cell).paddingLeft),
                  rule: parseFloat(getComputedStyle(cell).borderBottomWidth),
                  headAlign: getComputedStyle(th).textAlign,
                };
              });
            for (const sel of ["svc-settings-api-tokens table.data-table"]) {
              const look = await tableLook(sel);
              assert.equal(look.collapse, "collapse", `${sel}: ${JSON.stringify(look)}`);
              assert.ok(look.width > 0.95, `${sel} spans its container: ${JSON.stringify(look)}`);
              assert.ok(
                look.headPadding >= 6 && look.cellPadding >= 6,
                `${sel} cells have room: ${JSON.stringify(look)}`,
              );
              assert.ok(look.rule >= 1, `${sel} rows are ruled: ${JSON.stringify(look)}`);
              assert.ok(["left", "start"].includes(look.headAlign), JSON.stringify(look));
            }
            await page.goto(`${web}/settings?tab=flatpak`, { waitUntil: "domcontentloaded" });
            await page.waitForSelector("svc-settings-flatpak-repos table.data-table");
            const flatpak = await tableLook("svc-settings-flatpak-repos table.data-table");
            assert.ok(
              flatpak.collapse === "collapse" && flatpak.cellPadding >= 6 && flatpak.rule >= 1,
              JSON.stringify(flatpak),
            );

            // Disk encryption: the summary is a row of cards with a big number each.
            await page.goto(`${web}/disk-encryption`, { waitUntil: "domcontentloaded" });
            await page.waitForSelector("svc-disk-encryption-page dl.summary-cards > div");
            const cards = await page.$$eval(
              "svc-disk-encryption-page dl.summary-cards > div",
              (divs: El[]) =>
                divs.map((d) => {
                  const s = getComputedStyle(d);
                  return {
                    top: d.getBoundingClientRect().top,
                    border: parseFloat(s.borderTopWidth),
                    padding: parseFloat(s.paddingLeft),
                    number: parseFloat(getComputedStyle(d.querySelector("dd")).fontSize),
                    label: parseFloat(getComputedStyle(d.querySelector("dt")).fontSize),
                    margin: parseFloat(getComputedStyle(d.querySelector("dd")).marginLeft),
                  };
                }),
            );
            assert.equal(cards.length, 6);
            assert.ok(
              cards.every((c) => c.top === cards[0].top),
              `one row of cards: ${JSON.stringify(cards)}`,
            );
            for (const c of cards) {
              assert.ok(c.border >= 1 && c.padding >= 8, `a card: ${JSON.stringify(c)}`);
              assert.ok(c.number >= c.label * 1.4 && c.margin === 0, `a big number: ${JSON.stringify(c)}`);
            }
            await shot(page, "disk-encryption-summary");

            // The reveal dialog: its form controls are laid out and styled like the console's others.
            await page.evaluate(() => {
              const dialog = document.createElement("svc-disk-reveal-dialog");
              dialog.target = {
                id: "00000000-0000-4000-8000-000000000000",
                node_name: "ws-01",
                luks_uuid: "1234",
                device: "/dev/sda3",
              };
              document.body.append(dialog);
            });
            await page.waitForSelector("svc-disk-reveal-dialog textarea[name=reason]", { visible: true });
            const reveal = await page.$eval("svc-disk-reveal-dialog form", (form: El) => {
              const body = form.getBoundingClientRect();
              const look = (el: El) => {
                const s = getComputedStyle(el);
                const r = el.getBoundingClientRect();
                return {
                  share: r.width / body.width,
                  radius: parseFloat(s.borderTopLeftRadius),
                  padding: parseFloat(s.paddingLeft),
                  font: s.fontFamily,
                };
              };
              const label = form.querySelector("label");
              return {
                reason: look(form.querySelector("textarea")),
                password: look(form.querySelector("input[type=password]")),
                labelDisplay: getComputedStyle(label).display,
                gap: parseFloat(getComputedStyle(form).rowGap),
              };
            });
            for (const control of [reveal.reason, reveal.password]) {
              assert.ok(control.share > 0.9, `full width: ${JSON.stringify(reveal)}`);
              assert.ok(control.radius >= 2 && control.padding >= 4, `styled: ${JSON.stringify(reveal)}`);
              assert.doesNotMatch(control.font, /monospace/, JSON.stringify(reveal));
            }
            assert.ok(
              ["grid", "flex"].includes(reveal.labelDisplay) && reveal.gap >= 8,
              JSON.stringify(reveal),
            );
            await shot(page, "reveal-dialog");
            assert.deepEqual(await axeAll(page), [], "axe on the reveal dialog");
            await page.evaluate(() => document.querySelector("svc-disk-reveal-dialog").remove());

            // Import: a styled picker names the chosen file; the browser's own button is not shown.
            await page.goto(`${web}/policies`, { waitUntil: "domcontentloaded" });
            const importButton = await page.waitForFunction(
              () =>
                [...document.querySelectorAll("svc-policies-page sl-button")].find((b: El) =>
                  b.textContent.trim() === "Import"
                ),
              { polling: 250 },
            );
            await importButton.asElement()!.click();
            const file = await page.waitForSelector("svc-policies-page .file-picker input[type=file]");
            const picker = await page.$eval("svc-policies-page .file-picker", (p: El) => {
              const input = p.querySelector("input[type=file]").getBoundingClientRect();
              const button = p.querySelector(".file-picker-button");
              return {
                inputArea: input.width * input.height,
                button: button?.textContent.trim(),
                buttonBorder: button ? parseFloat(getComputedStyle(button).borderTopWidth) : 0,
                name: p.querySelector(".file-picker-name")?.textContent.trim(),
              };
            });
            assert.ok(picker.inputArea <= 1, `the native control is hidden: ${JSON.stringify(picker)}`);
            assert.match(picker.button ?? "", /Choose/);
            assert.ok(picker.buttonBorder >= 1, JSON.stringify(picker));
            assert.match(picker.name ?? "", /No file chosen/);
            const bundle = await Deno.makeTempFile({ suffix: ".yaml" });
            await Deno.writeTextFile(bundle, "policies: []\n");
            await (file as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(bundle);
            await page.waitForFunction(
              (n: string) =>
                document.querySelector("svc-policies-page .file-picker-name")?.textContent.includes(n),
              { polling: 250 },
              bundle.split("/").pop()!,
            );
            await shot(page, "import-picker");
            assert.deepEqual(await axeAll(page), [], "axe on the import dialog");
            await Deno.remove(bundle);
          },
        );

        await step("every Settings tab is axe-clean (every impact)", async () => {
          const found: Record<string, unknown[]> = {};
          for (
            const tab of [
              "users",
              "roles",
              "user-groups",
              "role-bindings",
              "agent",
              "api-tokens",
              "second-factors",
              "flatpak",
            ]
          ) {
            await page.goto(`${web}/settings?tab=${tab}`, { waitUntil: "domcontentloaded" });
            await page.waitForSelector(`svc-settings-page sl-tab-panel[name=${tab}][active]`);
            await page.waitForFunction(
              (name: string) => {
                const panel = document.querySelector(`svc-settings-page sl-tab-panel[name=${name}]`);
                return panel && !panel.querySelector("sl-spinner") &&
                  (panel.querySelector("table, form, section, p") != null);
              },
              { polling: 250 },
              tab,
            );
            const v = await axeAll(page);
            if (v.length) found[tab] = v;
          }
          assert.deepEqual(found, {});
        });

        await step("a 403 names the roles that grant what was refused", async () => {
          const context = await browser.createBrowserContext();
          const editorPage = await context.newPage();
          editorPage.setDefaultTimeout(120_000);
          await editorPage.setViewport({ width: 1440, height: 900 });
          await openConsoleLoggedIn(editorPage, web, { username: "editor", password: EDITOR_PASSWORD }, {
            path: `/policies/${browserPolicy.id}/edit`,
          });
          const name = await editorPage.waitForSelector(
            "svc-policy-editor-page sl-input[name=name] >>> input",
            {
              visible: true,
            },
          );
          await name!.type(" (edited)");
          // Meanwhile an administrator takes the role away.
          await api.call("DELETE", `/api/v1/users/${editor.id}/role-bindings/${editorBinding.id}`, {
            step_up: { password: adminPassword },
          });
          await editorPage.click("svc-policy-editor-page sl-button.save-policy");
          // (An sl-alert's host is display: contents, never "visible" to puppeteer: wait for it to exist.)
          await editorPage.waitForSelector("svc-policy-editor-page sl-alert.form-error");
          const text = await readableText(editorPage, "svc-policy-editor-page sl-alert.form-error");
          assert.doesNotMatch(text, /policy:edit/);
          assert.match(text, /Policy Editor/);
          assert.match(text, /Org Admin/);
          await context.close();
        });

        await step(
          "an Auditor at /policies/new reads why, instead of a form; TOTP enrolment is axe-clean",
          async () => {
            const context = await browser.createBrowserContext();
            const auditorPage = await context.newPage();
            auditorPage.setDefaultTimeout(120_000);
            await auditorPage.setViewport({ width: 1440, height: 900 });
            await openConsoleLoggedIn(auditorPage, web, { username: "auditor", password: AUDITOR_PASSWORD }, {
              path: "/policies/new",
            });
            await auditorPage.waitForSelector("svc-policy-flow-page .read-only-note");
            const text = await readableText(auditorPage, "svc-policy-flow-page");
            assert.match(text, /Policy Editor/);
            assert.equal(
              await auditorPage.$("svc-policy-flow-page .type-tiles input"),
              null,
              "no type to pick",
            );
            assert.equal(
              await auditorPage.$("svc-policy-flow-page sl-input[name=name]"),
              null,
              "no name to type",
            );
            assert.equal(await auditorPage.$("svc-policy-flow-page sl-button.save-policy"), null);
            assert.deepEqual(await axeAll(auditorPage), [], "axe on /policies/new for an Auditor");

            await auditorPage.goto(`${web}/settings?tab=second-factors`, { waitUntil: "domcontentloaded" });
            const setup = await auditorPage.waitForSelector("svc-mfa-settings sl-button.setup-totp", {
              visible: true,
            });
            await setup!.click();
            const password = await auditorPage.waitForSelector(
              "svc-mfa-settings sl-input[name=password] >>> input",
              {
                visible: true,
              },
            );
            await password!.type(AUDITOR_PASSWORD);
            await auditorPage.keyboard.press("Enter");
            await auditorPage.waitForSelector("svc-mfa-settings .totp-secret", { visible: true });
            await shot(auditorPage, "totp-enrolment");
            assert.deepEqual(await axeAll(auditorPage), [], "axe on TOTP enrolment");
            await context.close();
          },
        );

        assert.deepEqual(watch.pageErrors, []);
      });
    } finally {
      await Deno.remove(repoDir, { recursive: true }).catch(() => {});
    }
  },
);
