/**
 * Settings Chrome (and Chromium) and Microsoft Edge share: Edge is built on Chromium and keeps Chromium's
 * policy names, types and values for them. Written once; `{app}` is replaced by the product name
 * ({@link forApp}). Lists of URL patterns and extension ids are additive across policies (`merge: "union"`),
 * so two policies can each block their own sites or force-install their own extensions.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { field, type FieldInfo, options, requireWhen } from "../browser.ts";
import { joinPath } from "../json_guard.ts";
import type { IssueList } from "../sanitizers.ts";

const ALLOW_BLOCK = options([1, "Allow"], [2, "Block"]);
const ALLOW_BLOCK_ASK = options([1, "Allow"], [2, "Block"], [3, "Ask"]);

/** A list of content-setting URL patterns, additive across policies. */
export function sitesList(label: string, what: string): FieldInfo {
  return field(label, `${what}; patterns such as https://example.com or [*.]example.com.`, {
    format: "url_pattern",
    merge: "union",
  });
}

/** A list of URL filters (Chrome's URLBlocklist format), additive across policies. */
export function urlFilterList(label: string, what: string): FieldInfo {
  return field(
    label,
    `${what}; filters such as example.com (with subdomains), .example.com, https://example.com/path or *.`,
    {
      format: "url_filter",
      merge: "union",
    },
  );
}

const EXTENSION_TYPES = options(
  ["extension", "Extension"],
  ["theme", "Theme"],
  ["user_script", "User script"],
  ["hosted_app", "Hosted app"],
  ["legacy_packaged_app", "Legacy packaged app"],
  ["platform_app", "Platform app"],
);

/** Shared Chromium-family entries, top level and nested. */
export const CHROMIUM_FIELDS: Record<string, FieldInfo> = {
  // Start-up and home page
  HomepageLocation: field("Home page URL", "The page the home button opens.", { format: "url" }),
  HomepageIsNewTabPage: field("Home page is the new tab page", "The home button opens the new tab page."),
  NewTabPageLocation: field("New tab page URL", "Page opened in new tabs.", { format: "url" }),
  RestoreOnStartup: field("At start-up", "What {app} opens when it starts.", {
    enum: options([1, "Continue where you left off"], [4, "Open the pages in RestoreOnStartupURLs"], [
      5,
      "Open the new tab page",
    ]),
  }),
  RestoreOnStartupURLs: field("Start-up pages", "Pages opened at start-up when RestoreOnStartup is 4.", {
    format: "url",
  }),
  ShowHomeButton: field("Home button", "Shows the home button on the toolbar."),

  // Extensions
  ExtensionInstallForcelist: field(
    "Force-installed extensions",
    'Extensions installed silently and not removable: "<id>" or "<id>;<update URL>".',
    { format: "extension_forcelist_entry", merge: "union" },
  ),
  ExtensionInstallBlocklist: field(
    "Blocked extensions",
    'Extension ids users cannot install; "*" blocks every extension not allowlisted.',
    { format: "extension_id_or_star", merge: "union" },
  ),
  ExtensionInstallAllowlist: field("Allowed extensions", "Extension ids exempt from the blocklist.", {
    format: "extension_id",
    merge: "union",
  }),
  ExtensionInstallSources: field(
    "Extension install sources",
    "Match patterns of sites extensions may be installed from, e.g. https://extensions.example/*.",
    { format: "match_pattern", merge: "union" },
  ),
  ExtensionAllowedTypes: field("Allowed extension types", "Types of extensions and apps users may install.", {
    enum: EXTENSION_TYPES,
  }),
  ExtensionSettings: field(
    "Extension management",
    'Per extension id (or "*" for every extension, or an update URL): allow, block or force-install, and more.',
    { keyFormat: "extension_settings_key", merge: "per-entry" },
  ),
  "ExtensionSettings.*.installation_mode": field(
    "Installation",
    "Whether the extension may, must or cannot be installed.",
    {
      enum: options(
        ["allowed", "Allowed"],
        ["blocked", "Blocked"],
        ["force_installed", "Force-installed (users cannot remove it)"],
        ["normal_installed", "Installed (users can disable it)"],
        ["removed", "Removed (blocked and uninstalled)"],
      ),
    },
  ),
  "ExtensionSettings.*.update_url": field("Update URL", "Where to install the extension from.", {
    format: "url",
  }),
  "ExtensionSettings.*.override_update_url": field(
    "Always use this update URL",
    "Also use update_url for updates, instead of the extension's own.",
  ),
  "ExtensionSettings.*.blocked_permissions": field(
    "Blocked permissions",
    "API permissions the extension may not use, e.g. downloads, usb.",
  ),
  "ExtensionSettings.*.runtime_blocked_hosts": field(
    "Blocked hosts",
    "Sites the extension may not read or change, e.g. *://*.example.com.",
    { format: "url_pattern" },
  ),
  "ExtensionSettings.*.runtime_allowed_hosts": field(
    "Allowed hosts",
    "Exceptions to the blocked hosts.",
    { format: "url_pattern" },
  ),
  "ExtensionSettings.*.minimum_version_required": field(
    "Minimum version",
    "Older versions are disabled until updated, e.g. 1.2.0.",
  ),
  "ExtensionSettings.*.blocked_install_message": field(
    "Blocked message",
    "Text shown when a user tries to install a blocked extension.",
  ),
  "ExtensionSettings.*.install_sources": field(
    "Install sources",
    'Match patterns of sites extensions may be installed from ("*" entry only).',
    { format: "match_pattern" },
  ),
  "ExtensionSettings.*.allowed_types": field("Allowed types", 'Types users may install ("*" entry only).', {
    enum: EXTENSION_TYPES,
  }),

  // Content filtering
  URLBlocklist: urlFilterList("Blocked URLs", "Addresses users cannot open"),
  URLAllowlist: urlFilterList("Allowed URLs", "Exceptions to the blocked URLs"),
  ForceGoogleSafeSearch: field("Google SafeSearch", "Forces SafeSearch in Google web search."),

  // Security
  SSLErrorOverrideAllowed: field(
    "Allow proceeding past certificate errors",
    "False stops users from clicking through certificate warnings.",
  ),

  // Passwords and autofill
  PasswordManagerEnabled: field("Password manager", "False stops {app} from saving passwords."),
  AutofillAddressEnabled: field("Autofill addresses", "False stops {app} from saving and filling addresses."),
  AutofillCreditCardEnabled: field(
    "Autofill payment cards",
    "False stops {app} from saving and filling cards.",
  ),

  // Sign-in, profiles and sync
  BrowserSignin: field("Browser sign-in", "Whether users may or must sign in to {app}.", {
    enum: options([0, "Disabled"], [1, "Allowed"], [2, "Forced"]),
  }),
  SyncDisabled: field("Turn off sync", "Users cannot sync data to their account."),
  BrowserGuestModeEnabled: field("Guest mode", "False removes the guest profile."),

  // Privacy
  UserFeedbackAllowed: field("Feedback", "False removes the send-feedback commands."),
  SearchSuggestEnabled: field("Search suggestions", "False turns search suggestions off."),
  BlockThirdPartyCookies: field(
    "Block third-party cookies",
    "Blocks cookies from other sites than the page's.",
  ),
  AllowDeletingBrowserHistory: field("Allow deleting history", "False stops users from deleting history."),

  // Content settings
  DefaultCookiesSetting: field("Cookies", "Whether sites may store cookies by default.", {
    enum: options([1, "Allow"], [2, "Block"], [4, "Keep for the session only"]),
  }),
  CookiesAllowedForUrls: sitesList("Allow cookies on", "Sites that may store cookies"),
  CookiesBlockedForUrls: sitesList("Block cookies on", "Sites that may not store cookies"),
  DefaultPopupsSetting: field("Pop-ups", "Whether sites may open pop-ups by default.", { enum: ALLOW_BLOCK }),
  PopupsAllowedForUrls: sitesList("Allow pop-ups on", "Sites that may open pop-ups"),
  PopupsBlockedForUrls: sitesList("Block pop-ups on", "Sites that may not open pop-ups"),
  DefaultNotificationsSetting: field("Notifications", "Whether sites may show notifications by default.", {
    enum: ALLOW_BLOCK_ASK,
  }),
  DefaultGeolocationSetting: field("Location", "Whether sites may see the location by default.", {
    enum: ALLOW_BLOCK_ASK,
  }),
  AutoplayAllowed: field("Autoplay", "False stops media with sound from playing automatically."),

  // Downloads and printing
  DownloadDirectory: field(
    "Download folder",
    "Folder downloads go to; users cannot change it. ${home} and ${user_home} are the home folder.",
    { format: "directory" },
  ),
  PromptForDownloadLocation: field("Ask where to save", "Asks where to save every download."),
  DownloadRestrictions: field("Download restrictions", "Which downloads {app} blocks.", {
    enum: options(
      [0, "No special restrictions"],
      [1, "Block dangerous downloads"],
      [2, "Block potentially dangerous downloads"],
      [3, "Block all downloads"],
      [4, "Block malicious downloads"],
    ),
  }),
  PrintingEnabled: field("Printing", "False turns printing off."),

  // Behaviour
  DefaultBrowserSettingEnabled: field(
    "Default browser check",
    "True makes {app} check whether it is the default browser.",
  ),
  DeveloperToolsAvailability: field("Developer tools", "Where the developer tools may be used.", {
    enum: options(
      [0, "Allowed except on force-installed extensions"],
      [1, "Allowed"],
      [2, "Not allowed"],
    ),
  }),
  TranslateEnabled: field("Translation", "False turns the offer to translate pages off."),
  SpellcheckEnabled: field("Spell check", "Turns spell checking on or off."),
  HardwareAccelerationModeEnabled: field("Hardware acceleration", "False turns GPU acceleration off."),

  // Default search provider
  DefaultSearchProviderEnabled: field(
    "Use a default search provider",
    "Turns the default search provider on or off.",
  ),
  DefaultSearchProviderName: field("Search provider name", "Name of the default search provider."),
  DefaultSearchProviderSearchURL: field(
    "Search URL",
    "Search URL with {searchTerms} where the search text goes.",
    {
      format: "search_url",
    },
  ),

  // Network
  ProxyMode: field("Proxy mode", "How {app} connects through a proxy.", {
    enum: options(
      ["direct", "Never use a proxy"],
      ["auto_detect", "Auto-detect proxy settings"],
      ["pac_script", "Use a proxy .pac script"],
      ["fixed_servers", "Use fixed proxy servers"],
      ["system", "Use the system proxy settings"],
    ),
  }),
  ProxyServer: field("Proxy server", 'Proxy for fixed_servers mode, e.g. "proxy.example.com:3128".'),
  ProxyPacUrl: field("Proxy .pac URL", "Address of the proxy auto-configuration file.", {
    format: "url",
    schemes: ["http", "https", "file"],
  }),
  ProxyBypassList: field(
    "Proxy bypass list",
    'Hosts that bypass the proxy, comma-separated, e.g. "*.corp.example,localhost".',
  ),
  AuthServerAllowlist: field(
    "Integrated authentication servers",
    'Servers allowed to use Kerberos/NTLM single sign-on, comma-separated, e.g. "*.example.com".',
    { format: "host_list" },
  ),
};

/**
 * Chromium refuses a force-installed or normally installed extension without an update URL ("Error at
 * ExtensionSettings.<id>.update_url: Must be specified." in chrome://policy), so the policy would install nothing.
 */
export function checkExtensionSettings(json: Readonly<Record<string, JsonValue>>, issues: IssueList): void {
  const settings = json.ExtensionSettings;
  if (settings === null || typeof settings !== "object" || Array.isArray(settings)) return;
  for (const [id, entry] of Object.entries(settings)) {
    if (id === "*" || entry === null || typeof entry !== "object" || Array.isArray(entry)) continue;
    const mode = entry.installation_mode;
    if ((mode === "force_installed" || mode === "normal_installed") && !entry.update_url) {
      issues.add(
        joinPath(joinPath("ExtensionSettings", id), "update_url"),
        `is required when installation_mode is "${mode}": set the extension's update URL, e.g. https://clients2.google.com/service/update2/crx`,
      );
    }
  }
}

/** Cross-field rules every Chromium-based browser enforces the same way (Chrome and Edge call this first). */
export function checkChromiumFamily(json: Readonly<Record<string, JsonValue>>, issues: IssueList): void {
  checkExtensionSettings(json, issues);
  requireWhen(json, {
    when: "ProxyMode",
    is: "fixed_servers",
    needs: "ProxyServer",
    hint: "set the proxy server",
  }, issues);
  requireWhen(json, {
    when: "ProxyMode",
    is: "pac_script",
    needs: "ProxyPacUrl",
    hint: "set the URL of the .pac file",
  }, issues);
  requireWhen(json, {
    when: "RestoreOnStartup",
    is: 4,
    needs: "RestoreOnStartupURLs",
    hint: "list the pages to open",
  }, issues);
}
