/** Chrome and Chromium: the managed-policy JSON Chrome reads; merged by priority on the node. */
import { type ChromePolicy, ChromePolicySchema } from "../gen/svc/policy/v1/chrome_pb.ts";
import { type BrowserRules, type BrowserTypeDef, defineBrowserType } from "./browser.ts";
import { CHROME_CATALOGUE } from "./browser_catalogue/chrome.ts";

/** The Chrome policy type (Google Chrome and Chromium). */
export const chromeType: BrowserTypeDef<ChromePolicy> = defineBrowserType<ChromePolicy>({
  wireName: "Chrome",
  label: "Chrome and Chromium",
  description: "Browser policies for Google Chrome and Chromium.",
  schema: ChromePolicySchema,
  typedContentCase: "chromePolicy",
  catalogue: CHROME_CATALOGUE,
});

/** Allowed values and URL schemes of the curated Chrome settings, by catalogue path. */
export const CHROME_RULES: BrowserRules = chromeType.rules;
