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
