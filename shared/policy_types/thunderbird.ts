/** Thunderbird: the "policies" object of Thunderbird's policies.json; merged by priority on the node. */
import { type ThunderbirdPolicy, ThunderbirdPolicySchema } from "../gen/svc/policy/v1/thunderbird_pb.ts";
import { type BrowserRules, checkBrowserPolicy } from "./browser.ts";
import { defineType } from "./define.ts";

const TLS_VERSIONS = ["tls1", "tls1.1", "tls1.2", "tls1.3"];
const COOKIE_BEHAVIORS = ["accept", "reject-foreign", "reject", "limit-foreign", "reject-tracker"];
const WEB = ["http", "https"];

/** Documented enumerations and URL fields of the curated Thunderbird settings. */
export const THUNDERBIRD_RULES: BrowserRules = {
  enums: {
    SSLVersionMin: TLS_VERSIONS,
    SSLVersionMax: TLS_VERSIONS,
    "Cookies.Behavior": COOKIE_BEHAVIORS,
    "Cookies.BehaviorPrivateBrowsing": COOKIE_BEHAVIORS,
    "Proxy.Mode": ["none", "system", "manual", "autoDetect", "autoConfig"],
    "Proxy.SOCKSVersion": [4, 5],
    "SearchEngines.Add[].Method": ["GET", "POST"],
    "ExtensionSettings.*.installation_mode": ["allowed", "blocked", "force_installed", "normal_installed"],
    "Preferences.*.Status": ["default", "locked", "user", "clear"],
    "Preferences.*.Type": ["number", "boolean", "string"],
  },
  urls: {
    AppUpdateURL: ["https"],
    "DNSOverHTTPS.ProviderURL": ["https"],
    "Proxy.AutoConfigURL": ["http", "https", "file"],
    "SearchEngines.Add[].URLTemplate": WEB,
    "SearchEngines.Add[].SuggestURLTemplate": WEB,
    "SearchEngines.Add[].IconURL": ["http", "https", "data"],
    "ExtensionSettings.*.install_url": ["http", "https", "file"],
  },
};

/** The Thunderbird policy type. */
export const thunderbirdType = defineType<ThunderbirdPolicy>({
  wireName: "Thunderbird",
  schema: ThunderbirdPolicySchema,
  typedContentCase: "thunderbirdPolicy",
  merge: "priority_merge",
  names: "json",
  check: (message, issues) => checkBrowserPolicy(ThunderbirdPolicySchema, message, THUNDERBIRD_RULES, issues),
});
