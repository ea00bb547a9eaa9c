/** Microsoft Edge: the managed-policy JSON Edge reads on Linux; merged by priority on the node. */
import { type EdgePolicy, EdgePolicySchema } from "../gen/svc/policy/v1/edge_pb.ts";
import { type BrowserRules, checkBrowserPolicy } from "./browser.ts";
import { defineType } from "./define.ts";

const WEB = ["http", "https"];
const CONTENT_SETTING = [1, 2, 3, 4];

/** Documented enumerations and URL fields of the curated Edge settings. */
export const EDGE_RULES: BrowserRules = {
  enums: {
    RestoreOnStartup: [1, 4, 5],
    ForceBingSafeSearch: [0, 1, 2],
    SSLVersionMin: ["tls1.2", "tls1.3"],
    AutomaticHttpsDefault: [0, 2],
    BrowserSignin: [0, 1, 2],
    InPrivateModeAvailability: [0, 1, 2],
    DiagnosticData: [0, 1, 2],
    TrackingPrevention: [0, 1, 2, 3],
    DefaultCookiesSetting: CONTENT_SETTING,
    DefaultPopupsSetting: CONTENT_SETTING,
    DefaultNotificationsSetting: CONTENT_SETTING,
    DefaultGeolocationSetting: CONTENT_SETTING,
    DownloadRestrictions: [0, 1, 2, 3, 4],
    DeveloperToolsAvailability: [0, 1, 2],
    ProxyMode: ["direct", "auto_detect", "pac_script", "fixed_servers", "system"],
    "ExtensionSettings.*.installation_mode": [
      "allowed",
      "blocked",
      "force_installed",
      "normal_installed",
      "removed",
    ],
    "ExtensionSettings.*.toolbar_state": ["force_shown", "default_shown", "default_hidden"],
  },
  urls: {
    HomepageLocation: WEB,
    NewTabPageLocation: WEB,
    "RestoreOnStartupURLs[]": WEB,
    DefaultSearchProviderSearchURL: WEB,
    ProxyPacUrl: ["http", "https", "file"],
    "ExtensionSettings.*.update_url": WEB,
  },
};

/** The Edge policy type. */
export const edgeType = defineType<EdgePolicy>({
  wireName: "Edge",
  schema: EdgePolicySchema,
  typedContentCase: "edgePolicy",
  merge: "priority_merge",
  names: "json",
  check: (message, issues) => checkBrowserPolicy(EdgePolicySchema, message, EDGE_RULES, issues),
});
