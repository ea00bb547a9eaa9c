/** Thunderbird: the "policies" object of Thunderbird's policies.json; merged by priority on the node. */
import { type ThunderbirdPolicy, ThunderbirdPolicySchema } from "../gen/svc/policy/v1/thunderbird_pb.ts";
import { type BrowserRules, type BrowserTypeDef, defineBrowserType } from "./browser.ts";
import { THUNDERBIRD_CATALOGUE } from "./browser_catalogue/thunderbird.ts";

/** The Thunderbird policy type. */
export const thunderbirdType: BrowserTypeDef<ThunderbirdPolicy> = defineBrowserType<ThunderbirdPolicy>({
  wireName: "Thunderbird",
  label: "Thunderbird",
  description: "Mail client settings and add-ons for Thunderbird.",
  schema: ThunderbirdPolicySchema,
  typedContentCase: "thunderbirdPolicy",
  catalogue: THUNDERBIRD_CATALOGUE,
});

/** Allowed values and URL schemes of the curated Thunderbird settings, by catalogue path. */
export const THUNDERBIRD_RULES: BrowserRules = thunderbirdType.rules;
