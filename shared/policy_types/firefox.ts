/** Firefox: the "policies" object of Firefox's policies.json; merged by priority on the node. */
import { type FirefoxPolicy, FirefoxPolicySchema } from "../gen/svc/policy/v1/firefox_pb.ts";
import { type BrowserRules, checkBrowserPolicy } from "./browser.ts";
import { defineType } from "./define.ts";

const TLS_VERSIONS = ["tls1", "tls1.1", "tls1.2", "tls1.3"];
const COOKIE_BEHAVIORS = [
  "accept",
  "reject-foreign",
  "reject",
  "limit-foreign",
  "reject-tracker",
  "reject-tracker-and-partition-foreign",
];
const WEB = ["http", "https"];

/** Documented enumerations and URL fields of the curated Firefox settings. */
export const FIREFOX_RULES: BrowserRules = {
  enums: {
    SSLVersionMin: TLS_VERSIONS,
    SSLVersionMax: TLS_VERSIONS,
    HttpsOnlyMode: ["allowed", "disallowed", "enabled", "force_enabled"],
    "Cookies.Behavior": COOKIE_BEHAVIORS,
    "Cookies.BehaviorPrivateBrowsing": COOKIE_BEHAVIORS,
    "Proxy.Mode": ["none", "system", "manual", "autoDetect", "autoConfig"],
    "Proxy.SOCKSVersion": [4, 5],
    "Homepage.StartPage": ["none", "homepage", "previous-session", "homepage-locked"],
    DisplayBookmarksToolbar: ["always", "never", "newtab"],
    DisplayMenuBar: ["always", "never", "default-on", "default-off"],
    "Bookmarks[].Placement": ["toolbar", "menu"],
    SearchBar: ["unified", "separate"],
    "SearchEngines.Add[].Method": ["GET", "POST"],
    "ExtensionSettings.*.installation_mode": ["allowed", "blocked", "force_installed", "normal_installed"],
    "ExtensionSettings.*.default_area": ["navbar", "menupanel"],
    "Permissions.Autoplay.Default": ["allow-audio-video", "block-audio", "block-audio-video"],
    "Preferences.*.Status": ["default", "locked", "user", "clear"],
    "Preferences.*.Type": ["number", "boolean", "string"],
  },
  urls: {
    AppUpdateURL: ["https"],
    "Homepage.URL": WEB,
    "Homepage.Additional[]": WEB,
    OverrideFirstRunPage: WEB,
    OverridePostUpdatePage: WEB,
    "DNSOverHTTPS.ProviderURL": ["https"],
    "Proxy.AutoConfigURL": ["http", "https", "file"],
    "Bookmarks[].URL": WEB,
    "Bookmarks[].Favicon": ["http", "https", "data"],
    "SearchEngines.Add[].URLTemplate": WEB,
    "SearchEngines.Add[].SuggestURLTemplate": WEB,
    "SearchEngines.Add[].IconURL": ["http", "https", "data"],
    "ExtensionSettings.*.install_url": ["http", "https", "file"],
  },
};

/** The Firefox policy type. */
export const firefoxType = defineType<FirefoxPolicy>({
  wireName: "Firefox",
  schema: FirefoxPolicySchema,
  typedContentCase: "firefoxPolicy",
  merge: "priority_merge",
  names: "json",
  check: (message, issues) => checkBrowserPolicy(FirefoxPolicySchema, message, FIREFOX_RULES, issues),
});
