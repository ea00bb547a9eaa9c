/** Firefox: the "policies" object of Firefox's policies.json; merged by priority on the node. */
import { type FirefoxPolicy, FirefoxPolicySchema } from "../gen/svc/policy/v1/firefox_pb.ts";
import { type BrowserRules, type BrowserTypeDef, defineBrowserType } from "./browser.ts";
import { FIREFOX_CATALOGUE } from "./browser_catalogue/firefox.ts";

/** The Firefox policy type. */
export const firefoxType: BrowserTypeDef<FirefoxPolicy> = defineBrowserType<FirefoxPolicy>({
  wireName: "Firefox",
  label: "Firefox",
  description: "Browser settings, extensions and bookmarks for Firefox.",
  schema: FirefoxPolicySchema,
  typedContentCase: "firefoxPolicy",
  catalogue: FIREFOX_CATALOGUE,
});

/** Allowed values and URL schemes of the curated Firefox settings, by catalogue path. */
export const FIREFOX_RULES: BrowserRules = firefoxType.rules;
