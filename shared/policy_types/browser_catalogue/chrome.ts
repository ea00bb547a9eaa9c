/**
 * Catalogue of the curated Chrome settings (see ../browser.ts for the shape). They apply to Google Chrome and
 * Chromium; a setting only Google Chrome knows is marked `chromeOnly` (the agent does not write it for Chromium,
 * and the catalogue test against Debian's Chromium leaves it out).
 */
import { below, type BrowserCatalogue, field, forApp, options, pick, section } from "../browser.ts";
import { checkChromiumFamily, CHROMIUM_FIELDS, sitesList, urlFilterList } from "./chromium.ts";

const C = forApp(CHROMIUM_FIELDS, "Chrome");

/** The Chrome catalogue. */
export const CHROME_CATALOGUE: BrowserCatalogue = {
  groups: [
    "Start-up and home page",
    "Bookmarks",
    "Extensions",
    "Content filtering",
    "Safe Browsing and security",
    "Passwords and autofill",
    "Sign-in, profiles and sync",
    "Privacy and telemetry",
    "Content settings",
    "Downloads and printing",
    "Browser behaviour",
    "Default search provider",
    "Network",
    "HTTP authentication",
  ],
  fields: {
    ...section(
      "Start-up and home page",
      pick(C, [
        "HomepageLocation",
        "HomepageIsNewTabPage",
        "NewTabPageLocation",
        "RestoreOnStartup",
        "RestoreOnStartupURLs",
        "ShowHomeButton",
      ]),
    ),
    ...section("Bookmarks", {
      BookmarkBarEnabled: field(
        "Bookmarks bar",
        "Shows (true) or hides (false) the bookmarks bar; users cannot change it.",
      ),
      EditBookmarksEnabled: field(
        "Edit bookmarks",
        "False stops users from adding, changing or removing bookmarks.",
      ),
      ManagedBookmarks: field(
        "Managed bookmarks",
        'Read-only bookmark folder: [{"toplevel_name": "…"}, {"name": "…", "url": "…"}, {"name": "…", "children": […]}].',
      ),
    }),
    ...section(
      "Extensions",
      pick(C, [
        "ExtensionInstallForcelist",
        "ExtensionInstallBlocklist",
        "ExtensionInstallAllowlist",
        "ExtensionInstallSources",
        "ExtensionAllowedTypes",
        "ExtensionSettings",
      ]),
    ),
    ...section("Content filtering", {
      ...pick(C, ["URLBlocklist", "URLAllowlist", "ForceGoogleSafeSearch"]),
      ForceYouTubeRestrict: field("YouTube Restricted Mode", "Forces a minimum YouTube Restricted Mode.", {
        enum: options([0, "Off"], [1, "Moderate"], [2, "Strict"]),
      }),
    }),
    ...section("Safe Browsing and security", {
      SafeBrowsingProtectionLevel: field(
        "Safe Browsing",
        "Level of protection against dangerous sites and downloads.",
        {
          enum: options([0, "No protection"], [1, "Standard protection"], [2, "Enhanced protection"]),
        },
      ),
      SafeBrowsingAllowlistDomains: field(
        "Trusted domains",
        "Domains Safe Browsing trusts, e.g. intranet.example.",
        { format: "domain", merge: "union" },
      ),
      DisableSafeBrowsingProceedAnyway: field(
        "Block proceeding past Safe Browsing warnings",
        "Users cannot continue to a site flagged as dangerous.",
      ),
      SSLVersionMin: field("Minimum TLS version", "Oldest TLS version Chrome accepts.", {
        enum: options(["tls1.2", "TLS 1.2"]),
        deprecated:
          "Removed from current Chrome and Chromium, which always require TLS 1.2; older versions only",
      }),
      SSLErrorOverrideAllowed: C.SSLErrorOverrideAllowed,
      HttpsOnlyMode: field(
        "HTTPS-Only mode",
        "Whether Chrome upgrades connections to HTTPS and warns before HTTP.",
        {
          enum: options(
            ["allowed", "Users decide"],
            ["disallowed", "Off, users cannot turn it on"],
            ["force_enabled", "On in strict mode, users cannot turn it off"],
            ["force_balanced_enabled", "On in balanced mode, users cannot turn it off"],
          ),
        },
      ),
      AutoSelectCertificateForUrls: field(
        "Select client certificates automatically",
        'One JSON object per entry: {"pattern": "https://[*.]example.com", "filter": {"ISSUER": {"CN": "…"}}}.',
        { format: "json_object" },
      ),
    }),
    ...section("Passwords and autofill", {
      PasswordManagerEnabled: C.PasswordManagerEnabled,
      PasswordLeakDetectionEnabled: field(
        "Leaked password warnings",
        "Checks saved passwords against known breaches.",
      ),
      AutofillAddressEnabled: C.AutofillAddressEnabled,
      AutofillCreditCardEnabled: C.AutofillCreditCardEnabled,
    }),
    ...section("Sign-in, profiles and sync", {
      ...pick(C, ["BrowserSignin", "SyncDisabled"]),
      RestrictSigninToPattern: field(
        "Allowed accounts",
        "Regular expression of the Google accounts that may sign in, e.g. .*@example\\.com.",
        { format: "regex" },
      ),
      BrowserGuestModeEnabled: C.BrowserGuestModeEnabled,
      BrowserAddPersonEnabled: field("Add profiles", "False stops users from adding profiles."),
      IncognitoModeAvailability: field("Incognito mode", "Whether pages may or must open in Incognito.", {
        enum: options([0, "Available"], [1, "Disabled"], [2, "Forced"]),
      }),
    }),
    ...section("Privacy and telemetry", {
      MetricsReportingEnabled: field(
        "Usage statistics",
        "Sends usage statistics and crash reports to Google.",
      ),
      UserFeedbackAllowed: C.UserFeedbackAllowed,
      SearchSuggestEnabled: C.SearchSuggestEnabled,
      NetworkPredictionOptions: field(
        "Preload pages",
        "Whether Chrome preloads pages and resolves names early.",
        {
          enum: options([0, "Predict network actions"], [1, "Predict on non-metered networks"], [2, "Never"]),
        },
      ),
      BlockThirdPartyCookies: C.BlockThirdPartyCookies,
      SavingBrowserHistoryDisabled: field("Do not save history", "Chrome does not record browsing history."),
      AllowDeletingBrowserHistory: C.AllowDeletingBrowserHistory,
      ClearBrowsingDataOnExitList: field(
        "Clear data on exit",
        "Data types deleted when Chrome closes (sync must be off).",
        {
          enum: options(
            ["browsing_history", "Browsing history"],
            ["download_history", "Download history"],
            ["cookies_and_other_site_data", "Cookies and site data"],
            ["cached_images_and_files", "Cached images and files"],
            ["password_signin", "Passwords"],
            ["autofill", "Autofill data"],
            ["site_settings", "Site settings"],
            ["hosted_app_data", "Hosted app data"],
          ),
        },
      ),
    }),
    ...section("Content settings", {
      ...pick(C, ["DefaultCookiesSetting", "CookiesAllowedForUrls", "CookiesBlockedForUrls"]),
      CookiesSessionOnlyForUrls: sitesList(
        "Session-only cookies on",
        "Sites whose cookies are deleted when Chrome closes",
      ),
      DefaultJavaScriptSetting: field("JavaScript", "Whether sites may run JavaScript by default.", {
        enum: options([1, "Allow"], [2, "Block"]),
      }),
      JavaScriptAllowedForUrls: sitesList("Allow JavaScript on", "Sites that may run JavaScript"),
      JavaScriptBlockedForUrls: sitesList("Block JavaScript on", "Sites that may not run JavaScript"),
      ...pick(C, [
        "DefaultPopupsSetting",
        "PopupsAllowedForUrls",
        "PopupsBlockedForUrls",
        "DefaultNotificationsSetting",
        "DefaultGeolocationSetting",
        "AutoplayAllowed",
      ]),
      AutoplayAllowlist: urlFilterList(
        "Allow autoplay on",
        "Sites where media may autoplay even when Autoplay is off",
      ),
      AudioCaptureAllowed: field("Microphone", "False blocks microphone access for every site."),
      VideoCaptureAllowed: field("Camera", "False blocks camera access for every site."),
      ScreenCaptureAllowed: field("Screen sharing", "False blocks screen sharing for every site."),
    }),
    ...section(
      "Downloads and printing",
      pick(C, [
        "DownloadDirectory",
        "PromptForDownloadLocation",
        "DownloadRestrictions",
        "PrintingEnabled",
      ]),
    ),
    ...section("Browser behaviour", {
      ...pick(C, [
        "DefaultBrowserSettingEnabled",
        "DeveloperToolsAvailability",
        "TranslateEnabled",
        "SpellcheckEnabled",
      ]),
      SpellcheckLanguage: field("Spell check languages", "Languages always checked, e.g. en-US, de.", {
        format: "locale",
      }),
      BackgroundModeEnabled: field("Keep running in the background", "Lets apps run after Chrome is closed."),
      HardwareAccelerationModeEnabled: C.HardwareAccelerationModeEnabled,
      ComponentUpdatesEnabled: field("Component updates", "False stops updates of Chrome's components."),
      RelaunchNotification: field(
        "Relaunch after updates",
        "How Chrome asks users to restart after an update.",
        {
          enum: options([1, "Recommend a restart"], [2, "Require a restart"]),
        },
      ),
      RelaunchNotificationPeriod: field("Relaunch period", "Time users have to restart after an update.", {
        min: 3_600_000,
        max: 2_147_483_647,
        unit: "milliseconds",
      }),
    }),
    ...section("Default search provider", {
      ...pick(C, ["DefaultSearchProviderEnabled", "DefaultSearchProviderName"]),
      DefaultSearchProviderKeyword: field("Keyword", "Keyword that selects the provider in the address bar."),
      DefaultSearchProviderSearchURL: C.DefaultSearchProviderSearchURL,
      DefaultSearchProviderSuggestURL: field("Suggestions URL", "Suggestion URL with {searchTerms}.", {
        format: "search_url",
      }),
    }),
    ...section("Network", {
      ...pick(C, ["ProxyMode", "ProxyServer", "ProxyPacUrl", "ProxyBypassList"]),
      DnsOverHttpsMode: field("DNS over HTTPS", "Whether Chrome resolves names over HTTPS.", {
        enum: options(["off", "Off"], ["automatic", "Automatic (with fallback)"], ["secure", "Secure only"]),
      }),
      DnsOverHttpsTemplates: field(
        "DNS-over-HTTPS templates",
        "Resolver URI templates, separated by spaces.",
        {
          format: "doh_templates",
        },
      ),
    }),
    ...section("HTTP authentication", {
      AuthServerAllowlist: C.AuthServerAllowlist,
      AuthNegotiateDelegateAllowlist: field(
        "Kerberos delegation servers",
        "Servers Chrome may delegate the user's Kerberos credentials to, comma-separated.",
        { format: "host_list" },
      ),
      AuthSchemes: field(
        "Authentication schemes",
        'HTTP authentication schemes Chrome supports, e.g. "negotiate,ntlm".',
        {
          format: "comma_list",
          enum: options(["basic", "Basic"], ["digest", "Digest"], ["ntlm", "NTLM"], [
            "negotiate",
            "Negotiate",
          ]),
        },
      ),
    }),

    ...below(C, ["ExtensionSettings"]),
    "ExtensionSettings.*.toolbar_pin": field(
      "Toolbar pin",
      "Whether the extension is pinned to the toolbar.",
      {
        enum: options(["force_pinned", "Pinned (users cannot unpin)"], ["default_unpinned", "Not pinned"]),
      },
    ),
  },
  crossCheck(json, issues) {
    checkChromiumFamily(json, issues);
    // Both conflicts are reported by Chromium itself (chrome://policy) and make the setting a no-op.
    if (json.RestoreOnStartup === 1 && Array.isArray(json.CookiesSessionOnlyForUrls)) {
      issues.add(
        "CookiesSessionOnlyForUrls",
        "has no effect while RestoreOnStartup is 1 (continue where you left off); choose another RestoreOnStartup or remove the list",
      );
    }
    if (json.DnsOverHttpsMode === "off" && json.DnsOverHttpsTemplates !== undefined) {
      issues.add(
        "DnsOverHttpsTemplates",
        'is not used while DnsOverHttpsMode is "off"; set DnsOverHttpsMode to "automatic" or "secure", or remove the templates',
      );
    }
  },
};
