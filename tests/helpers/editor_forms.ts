/**
 * Pieces the policy-editor tests share: the field paths a form catalogue must cover, and typing into a
 * Shoelace input the way a person does.
 */
import type { DescMessage } from "@bufbuild/protobuf";
import type { Page } from "puppeteer-core";

/** Catalogue paths of every field of `message`: `a`, `a.b`, `list[].b`. */
export function fieldPaths(message: DescMessage, prefix = ""): string[] {
  return message.fields.flatMap((f) => {
    const path = prefix ? `${prefix}.${f.jsonName}` : f.jsonName;
    if (f.fieldKind === "message") return [path, ...fieldPaths(f.message, path)];
    if (f.fieldKind === "list" && f.listKind === "message") {
      return [path, ...fieldPaths(f.message, `${path}[]`)];
    }
    return [path];
  });
}

/**
 * How a form catalogue and the content message disagree: the message's fields it gives no label, and the
 * paths it labels that are no field of the message. Both empty when it covers every field and names no other.
 */
export function catalogueGaps(
  fieldInfo: Record<string, unknown>,
  message: DescMessage,
): { unlabelled: string[]; noField: string[] } {
  const fields = fieldPaths(message);
  return {
    unlabelled: fields.filter((p) => !(p in fieldInfo)),
    noField: Object.keys(fieldInfo).filter((p) => !fields.includes(p)),
  };
}

/** Replaces the text of the input or textarea inside the Shoelace element `host`, as typing would. */
export async function fill(page: Page, host: string, value: string): Promise<void> {
  const input = await page.waitForSelector(`${host} >>> input, ${host} >>> textarea`, { visible: true });
  await input!.evaluate((e: { scrollIntoView(o: unknown): void }) => e.scrollIntoView({ block: "center" }));
  await input!.click({ count: 3 });
  await page.keyboard.down("Control");
  await page.keyboard.press("a");
  await page.keyboard.up("Control");
  await page.keyboard.press("Backspace");
  await input!.type(value);
  await page.keyboard.press("Tab");
}

// deno-lint-ignore no-explicit-any
declare const document: any;

/**
 * Starts a new policy in the guided flow (`/policies/new`): picks the type's tile, names the policy and goes
 * on to the settings step, where the type's form is.
 */
export async function startNewPolicy(page: Page, web: string, type: string, name: string): Promise<void> {
  await page.goto(`${web}/policies/new`, { waitUntil: "load" });
  const tile = `svc-policy-flow-page .type-tile[data-type="${type}"] input`;
  await page.waitForSelector(tile, { visible: true });
  await page.click(tile);
  await page.waitForFunction(
    (t: string) => document.querySelector("svc-policy-flow-page .type-tiles input:checked")?.value === t,
    {},
    type,
  );
  await fill(page, "svc-policy-flow-page .policy-details sl-input[name=name]", name);
  await page.click("svc-policy-flow-page sl-button.flow-next");
  await page.waitForFunction(() =>
    document.querySelector('svc-policy-flow-page .flow-stepper [aria-current="step"]')?.dataset.step ===
      "configure"
  );
}

// deno-lint-ignore no-explicit-any
declare const location: any;

/**
 * Saves the policy open in the editor once its validation summary says "No problems", and answers its id
 * from the editor's address (`/policies/<id>/edit`) the save leads to.
 */
export async function savePolicy(page: Page): Promise<string> {
  await page.waitForFunction(() =>
    document.querySelector(".validation-summary")?.textContent?.includes("No problems")
  );
  await page.click("sl-button.save-policy");
  await page.waitForFunction(() => /^\/policies\/[0-9a-f-]{36}\/edit$/.test(location.pathname));
  return new URL(page.url()).pathname.split("/")[2];
}
