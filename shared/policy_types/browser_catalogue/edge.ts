/** Catalogue of the curated Microsoft Edge settings (see ../browser.ts for the shape). */
import { below, type BrowserCatalogue, field, forApp, options, pick, section } from "../browser.ts";
import { checkChromiumFamily, CHROMIUM_FIELDS } from "./chromium.ts";

const C = forApp(CHROMIUM_FIELDS, "Edge");

/** The Edge catalogue. */
export const EDGE_CATALOGUE: BrowserCatalogue = {
  groups: [
    "Start-up, home page and first run",
    "New tab page",
    "Favorites",
    "Extensions",
    "Content filtering",
    "SmartScreen and security",
    "Passwords and autofill",
    "Sign-in, profiles and sync",
    "Privacy and telemetry",
    "Content settings",
    "Downloads and printing",
    "Edge features",
    "Default search provider",
    "Network and authentication",
  ],
  fields: {
    ...section("Start-up, home page and first run", {
      ...pick(C, [
        "HomepageLocation",
        "HomepageIsNewTabPage",
        "NewTabPageLocation",
        "RestoreOnStartup",
        "RestoreOnStartupURLs",
        "ShowHomeButton",
      ]),
      HideFirstRunExperience: field(
        "Skip the first-run experience",
        "Edge starts without the welcome pages.",
      ),
      PromotionalTabsEnabled: field("Promotional tabs", "False stops Edge from opening promotional pages."),
      ShowRecommendationsEnabled: field("Recommendations", "False turns Edge's feature recommendations off."),
    }),
    ...section("New tab page", {
      NewTabPageContentEnabled: field("Microsoft content", "False removes news and other Microsoft content."),
      NewTabPageQuickLinksEnabled: field("Quick links", "False hides the quick links."),
      NewTabPageHideDefaultTopSites: field("Hide default top sites", "Hides the default top sites."),
      NewTabPageManagedQuickLinks: field(
        "Managed quick links",
        'Quick links to show: [{"url": "https://…", "title": "…", "pinned": true}].',
      ),
    }),
    ...section("Favorites", {
      FavoritesBarEnabled: field("Favorites bar", "Shows (true) or hides (false) the favorites bar."),
      EditFavoritesEnabled: field("Edit favorites", "False stops users from changing favorites."),
      ManagedFavorites: field(
        "Managed favorites",
        'Read-only favorites folder: [{"toplevel_name": "…"}, {"name": "…", "url": "…"}, …].',
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
      ...pick(C, ["URLBlocklist", "URLAllowlist"]),
      ForceBingSafeSearch: field("Bing SafeSearch", "Forces a minimum SafeSearch level in Bing.", {
        enum: options([0, "Not enforced"], [1, "Moderate"], [2, "Strict"]),
      }),
      ForceGoogleSafeSearch: C.ForceGoogleSafeSearch,
    }),
    ...section("SmartScreen and security", {
      SmartScreenEnabled: field(
        "Microsoft Defender SmartScreen",
        "Warns about phishing sites and malicious downloads.",
      ),
      PreventSmartScreenPromptOverride: field(
        "Block bypassing SmartScreen warnings for sites",
        "Users cannot continue to a site SmartScreen flagged.",
      ),
      PreventSmartScreenPromptOverrideForFiles: field(
        "Block bypassing SmartScreen warnings for downloads",
        "Users cannot keep a download SmartScreen flagged.",
      ),
      SSLVersionMin: field("Minimum TLS version", "Oldest TLS version Edge accepts.", {
        enum: options(["tls1.2", "TLS 1.2"]),
        deprecated: "Removed from current Edge, which always requires TLS 1.2; older versions only",
      }),
      SSLErrorOverrideAllowed: C.SSLErrorOverrideAllowed,
      EnhanceSecurityMode: field(
        "Enhanced security mode",
        "Extra protections against memory-safety attacks.",
        {
          enum: options([0, "Standard"], [1, "Balanced"], [2, "Strict"], [3, "Basic"]),
        },
      ),
      AutomaticHttpsDefault: field("Automatic HTTPS", "Whether Edge switches connections to HTTPS.", {
        enum: options([0, "Off"], [1, "On capable domains"], [2, "Always upgrade"]),
      }),
    }),
    ...section("Passwords and autofill", {
      PasswordManagerEnabled: C.PasswordManagerEnabled,
      PasswordGeneratorEnabled: field("Password generator", "Suggests strong passwords when signing up."),
      PasswordMonitorAllowed: field("Password monitor", "Warns when saved passwords appear in a breach."),
      AutofillAddressEnabled: C.AutofillAddressEnabled,
      AutofillCreditCardEnabled: C.AutofillCreditCardEnabled,
    }),
    ...section("Sign-in, profiles and sync", {
      ...pick(C, ["BrowserSignin", "SyncDisabled", "BrowserGuestModeEnabled"]),
      BrowserAddProfileEnabled: field("Add profiles", "False stops users from adding profiles."),
      InPrivateModeAvailability: field("InPrivate mode", "Whether pages may or must open InPrivate.", {
        enum: options([0, "Available"], [1, "Disabled"], [2, "Forced"]),
      }),
    }),
    ...section("Privacy and telemetry", {
      DiagnosticData: field("Diagnostic data", "How much diagnostic data Edge sends to Microsoft.", {
        enum: options([0, "Off"], [1, "Required data"], [2, "Optional data"]),
      }),
      PersonalizationReportingEnabled: field(
        "Personalization",
        "Lets Microsoft personalize ads and content.",
      ),
      UserFeedbackAllowed: C.UserFeedbackAllowed,
      TrackingPrevention: field("Tracking prevention", "How strictly Edge blocks trackers.", {
        enum: options([0, "Off"], [1, "Basic"], [2, "Balanced"], [3, "Strict"]),
      }),
      ConfigureDoNotTrack: field("Send Do Not Track", "Sends the Do Not Track header."),
      BlockThirdPartyCookies: C.BlockThirdPartyCookies,
      SearchSuggestEnabled: C.SearchSuggestEnabled,
      AddressBarMicrosoftSearchInBingProviderEnabled: field(
        "Microsoft Search in the address bar",
        "Shows work results from Microsoft Search in Bing.",
      ),
      AllowDeletingBrowserHistory: C.AllowDeletingBrowserHistory,
      ClearBrowsingDataOnExit: field("Clear data on exit", "Deletes browsing data when Edge closes."),
    }),
    ...section(
      "Content settings",
      pick(C, [
        "DefaultCookiesSetting",
        "CookiesAllowedForUrls",
        "CookiesBlockedForUrls",
        "DefaultPopupsSetting",
        "PopupsAllowedForUrls",
        "PopupsBlockedForUrls",
        "DefaultNotificationsSetting",
        "DefaultGeolocationSetting",
        "AutoplayAllowed",
      ]),
    ),
    ...section(
      "Downloads and printing",
      pick(C, [
        "DownloadDirectory",
        "PromptForDownloadLocation",
        "DownloadRestrictions",
        "PrintingEnabled",
      ]),
    ),
    ...section("Edge features", {
      HubsSidebarEnabled: field("Sidebar", "Shows the sidebar."),
      EdgeShoppingAssistantEnabled: field("Shopping", "Shopping price comparisons and coupons."),
      EdgeCollectionsEnabled: field("Collections", "The Collections feature."),
      ShowMicrosoftRewards: field("Microsoft Rewards", "Shows Microsoft Rewards."),
      SleepingTabsEnabled: field("Sleeping tabs", "Puts background tabs to sleep to save resources."),
      SleepingTabsTimeout: field("Sleeping tabs timeout", "Inactivity before a background tab sleeps.", {
        enum: options(
          [30, "30 seconds"],
          [300, "5 minutes"],
          [900, "15 minutes"],
          [1800, "30 minutes"],
          [3600, "1 hour"],
          [7200, "2 hours"],
          [10800, "3 hours"],
          [21600, "6 hours"],
          [43200, "12 hours"],
        ),
        unit: "seconds",
      }),
      ...pick(C, [
        "DefaultBrowserSettingEnabled",
        "DeveloperToolsAvailability",
        "TranslateEnabled",
        "SpellcheckEnabled",
        "HardwareAccelerationModeEnabled",
      ]),
    }),
    ...section("Default search provider", {
      ...pick(C, [
        "DefaultSearchProviderEnabled",
        "DefaultSearchProviderName",
        "DefaultSearchProviderSearchURL",
      ]),
      ManagedSearchEngines: field(
        "Managed search engines",
        'Search engines users can choose from: [{"name", "keyword", "search_url", "is_default"}, …] (at most 10).',
      ),
    }),
    ...section(
      "Network and authentication",
      pick(C, [
        "ProxyMode",
        "ProxyServer",
        "ProxyPacUrl",
        "ProxyBypassList",
        "AuthServerAllowlist",
      ]),
    ),

    ...below(C, ["ExtensionSettings"]),
    "ExtensionSettings.*.toolbar_state": field(
      "Toolbar button",
      "Whether the extension's button is on the toolbar.",
      {
        enum: options(
          ["force_shown", "Shown (users cannot hide it)"],
          ["default_shown", "Shown"],
          ["default_hidden", "Hidden"],
        ),
      },
    ),
  },
  crossCheck(json, issues) {
    checkChromiumFamily(json, issues);
  },
};
