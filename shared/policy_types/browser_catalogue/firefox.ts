/** Catalogue of the curated Firefox settings (see ../browser.ts for the shape). */
import {
  below,
  type BrowserCatalogue,
  checkTlsRange,
  field,
  type FieldInfo,
  forApp,
  options,
  pick,
  requireWhen,
  section,
} from "../browser.ts";
import { MOZILLA_DOWNLOAD_KEYS, MOZILLA_FIELDS, MOZILLA_UPDATE_KEYS } from "./mozilla.ts";

const M = forApp(MOZILLA_FIELDS, "Firefox");

const COOKIE_BEHAVIOR = options(
  ["accept", "Accept all cookies"],
  ["reject-foreign", "Reject third-party cookies"],
  ["reject", "Reject all cookies"],
  ["limit-foreign", "Third-party cookies only from visited sites"],
  ["reject-tracker", "Reject known trackers"],
  ["reject-tracker-and-partition-foreign", "Reject trackers, partition other third-party cookies"],
  ["partition-foreign", "Partition third-party cookies"],
);

const PERMISSION_KINDS = [
  "Camera",
  "Microphone",
  "Location",
  "Notifications",
  "Autoplay",
  "VirtualReality",
  "ScreenShare",
];

function permission(kind: string, what: string): Record<string, FieldInfo> {
  const p = `Permissions.${kind}`;
  const out: Record<string, FieldInfo> = {
    [p]: field(kind.replace(/([a-z])([A-Z])/g, "$1 $2"), `Which sites may use ${what}.`),
    [`${p}.Allow`]: field("Allow", `Origins that may use ${what} without asking.`, { format: "origin" }),
    [`${p}.Block`]: field("Block", `Origins that may never use ${what}.`, { format: "origin" }),
    [`${p}.Locked`]: field("Lock", "Users cannot change this permission."),
  };
  if (kind === "Autoplay") {
    out[`${p}.Default`] = field("Default", "What autoplaying media may do on other sites.", {
      enum: options(
        ["allow-audio-video", "Allow audio and video"],
        ["block-audio", "Block audio"],
        ["block-audio-video", "Block audio and video"],
      ),
    });
    out[`${p}.BlockNewRequests`] = field("Block new requests", "Not used by Autoplay.", {
      unsupported: "Firefox has no BlockNewRequests for Autoplay; use Default instead",
    });
  } else {
    out[`${p}.BlockNewRequests`] = field("Block new requests", `Sites not listed cannot ask to use ${what}.`);
    out[`${p}.Default`] = field("Default", "Only used by Autoplay.", {
      unsupported: `Firefox has Default only for Autoplay; for ${kind} use Allow, Block and BlockNewRequests`,
    });
  }
  return out;
}

/** The Firefox catalogue. */
export const FIREFOX_CATALOGUE: BrowserCatalogue = {
  groups: [
    "Updates",
    "Privacy and telemetry",
    "Security",
    "Passwords and autofill",
    "Restrictions",
    "Start-up, home page and new tab",
    "Appearance and general behaviour",
    "Downloads",
    "Search",
    "Extensions, permissions and preferences",
  ],
  fields: {
    ...section(
      "Updates",
      pick(M, MOZILLA_UPDATE_KEYS),
    ),
    ...section("Privacy and telemetry", {
      DisableTelemetry: M.DisableTelemetry,
      DisableFirefoxStudies: field(
        "Turn off studies",
        "Firefox never runs Mozilla's studies (Shield, Normandy).",
      ),
      DisablePocket: field("Turn off Pocket", "Removes the Pocket save-for-later feature."),
      DisableFirefoxAccounts: field(
        "Turn off Mozilla accounts",
        "Removes sign-in to a Mozilla account and Sync.",
      ),
      DisableFormHistory: field(
        "Forget form and search history",
        "Firefox does not remember form and search entries.",
      ),
      DisableFeedbackCommands: field(
        "Hide feedback commands",
        "Removes Submit Feedback and Report Deceptive Site.",
      ),
      DisablePrivateBrowsing: field("Turn off private windows", "Users cannot open private windows."),
      DisableForgetButton: field("Hide the Forget button", "Removes the button that clears recent history."),
      NetworkPrediction: M.NetworkPrediction,
      CaptivePortal: M.CaptivePortal,
      EnableTrackingProtection: field(
        "Tracking protection",
        "Blocks trackers, cryptominers and fingerprinters, with site exceptions.",
      ),
      Cookies: M.Cookies,
      SanitizeOnShutdown: field("Clear data on exit", "Which data Firefox deletes when it closes."),
      UserMessaging: field(
        "Recommendations and messages",
        "Which suggestions and onboarding messages Firefox shows.",
      ),
      FirefoxSuggest: field(
        "Firefox Suggest",
        "Suggestions in the address bar from Mozilla and its partners.",
      ),
    }),
    ...section("Security", {
      DisableSecurityBypass: M.DisableSecurityBypass,
      SSLVersionMin: M.SSLVersionMin,
      SSLVersionMax: M.SSLVersionMax,
      HttpsOnlyMode: field("HTTPS-Only mode", "Whether Firefox upgrades every connection to HTTPS.", {
        enum: options(
          ["allowed", "Off, users may turn it on"],
          ["disallowed", "Off, users cannot turn it on"],
          ["enabled", "On, users may turn it off"],
          ["force_enabled", "On, users cannot turn it off"],
        ),
      }),
      Certificates: M.Certificates,
      Authentication: M.Authentication,
      DNSOverHTTPS: M.DNSOverHTTPS,
      Proxy: M.Proxy,
    }),
    ...section("Passwords and autofill", {
      ...pick(M, [
        "PasswordManagerEnabled",
        "OfferToSaveLogins",
        "OfferToSaveLoginsDefault",
        "DisablePasswordReveal",
        "DisableMasterPasswordCreation",
        "PrimaryPassword",
      ]),
      PasswordManagerExceptions: field(
        "Never save passwords for",
        "Origins for which Firefox never offers to save passwords.",
        {
          format: "origin",
        },
      ),
      AutofillAddressEnabled: field(
        "Autofill addresses",
        "False stops Firefox from saving and filling addresses.",
      ),
      AutofillCreditCardEnabled: field(
        "Autofill payment cards",
        "False stops Firefox from saving and filling cards.",
      ),
    }),
    ...section("Restrictions", {
      ...pick(M, [
        "BlockAboutAddons",
        "BlockAboutConfig",
        "BlockAboutProfiles",
        "BlockAboutSupport",
        "DisableDeveloperTools",
      ]),
      DisableProfileImport: field("Block import", "Removes the command to import data from other browsers."),
      DisableProfileRefresh: field("Block refresh", "Removes the Refresh Firefox button."),
      DisableSafeMode: M.DisableSafeMode,
      DisableFirefoxScreenshots: field("Turn off screenshots", "Removes the built-in screenshot tool."),
      DisableSetDesktopBackground: field(
        "Block Set as Desktop Background",
        "Removes the command for images.",
      ),
      DisableBuiltinPDFViewer: M.DisableBuiltinPDFViewer,
      WebsiteFilter: field("Website filter", "Blocks sites by match pattern, with exceptions.", {
        merge: "per-member-union",
      }),
      LocalFileLinks: M.LocalFileLinks,
    }),
    ...section("Start-up, home page and new tab", {
      Homepage: field("Home page", "The home page and what Firefox shows at start-up."),
      NewTabPage: field("New tab page", "False shows a blank page in new tabs."),
      ShowHomeButton: field("Home button", "Shows the home button on the toolbar."),
      FirefoxHome: field("Firefox Home content", "Which sections the Firefox Home page shows."),
      OverrideFirstRunPage: field("First-run page", "Page shown on first start; empty shows none.", {
        format: "url",
        allowEmpty: true,
      }),
      OverridePostUpdatePage: field("After-update page", "Page shown after an update; empty shows none.", {
        format: "url",
        allowEmpty: true,
      }),
      DontCheckDefaultBrowser: field(
        "Skip default browser check",
        "Firefox does not ask to become the default browser.",
      ),
    }),
    ...section("Appearance and general behaviour", {
      DisplayBookmarksToolbar: field("Bookmarks toolbar", "When the bookmarks toolbar is shown.", {
        enum: options(["always", "Always"], ["never", "Never"], ["newtab", "On the new tab page"]),
      }),
      DisplayMenuBar: field("Menu bar", "Whether the menu bar is shown.", {
        enum: options(
          ["always", "Always (users cannot hide it)"],
          ["never", "Never (users cannot show it)"],
          ["default-on", "Shown, users can hide it"],
          ["default-off", "Hidden, users can show it"],
        ),
      }),
      NoDefaultBookmarks: field("No default bookmarks", "Does not create Mozilla's default bookmarks."),
      Bookmarks: field("Bookmarks", "Bookmarks added to the toolbar or menu.", { merge: "union" }),
      ManagedBookmarks: field(
        "Managed bookmarks",
        'Read-only bookmark folder in Chrome\'s format: [{"toplevel_name": "…"}, {"name", "url"}, …].',
      ),
      HardwareAcceleration: M.HardwareAcceleration,
      TranslateEnabled: field("Translations", "False turns the built-in page translation off."),
      PDFjs: M.PDFjs,
      PictureInPicture: field("Picture-in-picture", "The picture-in-picture video toggle."),
      EncryptedMediaExtensions: field("DRM content", "Whether Firefox plays DRM-protected media."),
      RequestedLocales: M.RequestedLocales,
    }),
    ...section("Downloads", {
      ...pick(M, MOZILLA_DOWNLOAD_KEYS),
      StartDownloadsInTempDirectory: field(
        "Download to a temporary folder",
        "Starts downloads in the temp folder first.",
      ),
    }),
    ...section("Search", {
      SearchSuggestEnabled: field("Search suggestions", "False turns search suggestions off."),
      SearchBar: field("Search bar", "Whether the search bar is part of the address bar.", {
        enum: options(["unified", "In the address bar"], ["separate", "Separate search bar"]),
      }),
      SearchEngines: M.SearchEngines,
    }),
    ...section("Extensions, permissions and preferences", {
      Extensions: { ...M.Extensions, merge: "per-member-union" },
      ExtensionSettings: M.ExtensionSettings,
      ExtensionUpdate: M.ExtensionUpdate,
      Permissions: field(
        "Site permissions",
        "Which sites may use the camera, microphone, location and more.",
        {
          merge: "per-entry",
        },
      ),
      Preferences: M.Preferences,
    }),

    ...below(M, [
      "Cookies",
      "DisableSecurityBypass",
      "Certificates",
      "Authentication",
      "DNSOverHTTPS",
      "Proxy",
      "PDFjs",
      "SearchEngines",
      "Extensions",
      "ExtensionSettings",
      "Preferences",
    ]),
    "Cookies.AllowSession": field(
      "Allow for the session",
      "Origins whose cookies are deleted when Firefox closes.",
      {
        format: "origin",
      },
    ),
    "Cookies.Behavior": field("Cookie behaviour", "Which cookies Firefox accepts.", {
      enum: COOKIE_BEHAVIOR,
    }),
    "Cookies.BehaviorPrivateBrowsing": field(
      "Behaviour in private windows",
      "Which cookies private windows accept.",
      {
        enum: COOKIE_BEHAVIOR,
      },
    ),
    "DNSOverHTTPS.Fallback": field(
      "Fall back to system DNS",
      "False never falls back when the provider fails.",
    ),
    "EnableTrackingProtection.Value": field("Enable", "Turns tracking protection on or off."),
    "EnableTrackingProtection.Locked": field("Lock", "Users cannot change tracking protection."),
    "EnableTrackingProtection.Cryptomining": field("Block cryptominers", "Blocks cryptomining scripts."),
    "EnableTrackingProtection.Fingerprinting": field(
      "Block fingerprinters",
      "Blocks fingerprinting scripts.",
    ),
    "EnableTrackingProtection.EmailTracking": field("Block email trackers", "Blocks email tracking pixels."),
    "EnableTrackingProtection.Exceptions": field("Exceptions", "Origins where tracking protection is off.", {
      format: "origin",
    }),
    "SanitizeOnShutdown.Cache": field("Cache", "Clear the cache on exit."),
    "SanitizeOnShutdown.Cookies": field("Cookies", "Clear cookies and site data on exit."),
    "SanitizeOnShutdown.FormData": field("Form data", "Clear form and search history on exit."),
    "SanitizeOnShutdown.History": field("History", "Clear browsing and download history on exit."),
    "SanitizeOnShutdown.Sessions": field("Sessions", "Clear active logins on exit."),
    "SanitizeOnShutdown.SiteSettings": field("Site settings", "Clear site preferences on exit."),
    "SanitizeOnShutdown.Locked": field("Lock", "Users cannot change these choices."),
    "UserMessaging.ExtensionRecommendations": field(
      "Extension recommendations",
      "Recommend extensions while browsing.",
    ),
    "UserMessaging.FeatureRecommendations": field(
      "Feature recommendations",
      "Recommend Firefox features while browsing.",
    ),
    "UserMessaging.UrlbarInterventions": field(
      "Address bar interventions",
      "Offer actions from the address bar.",
    ),
    "UserMessaging.SkipOnboarding": field(
      "Skip onboarding",
      "Do not show onboarding messages on the new tab page.",
    ),
    "UserMessaging.MoreFromMozilla": field(
      "More from Mozilla",
      "Show the More from Mozilla settings section.",
    ),
    "UserMessaging.FirefoxLabs": field("Firefox Labs", "Show the Firefox Labs settings section."),
    "UserMessaging.Locked": field("Lock", "Users cannot change these choices."),
    "FirefoxSuggest.WebSuggestions": field("Web suggestions", "Suggestions from the web in the address bar."),
    "FirefoxSuggest.SponsoredSuggestions": field(
      "Sponsored suggestions",
      "Sponsored suggestions in the address bar.",
    ),
    "FirefoxSuggest.ImproveSuggest": field(
      "Improve Suggest",
      "Send search data to Mozilla to improve Suggest.",
    ),
    "FirefoxSuggest.Locked": field("Lock", "Users cannot change these choices."),
    "WebsiteFilter.Block": field("Block", "Match patterns of blocked sites, e.g. *://*.example.com/*.", {
      format: "match_pattern",
    }),
    "WebsiteFilter.Exceptions": field("Exceptions", "Match patterns allowed despite Block.", {
      format: "match_pattern",
    }),
    "Homepage.URL": field("Home page URL", "The home page.", { format: "url" }),
    "Homepage.Locked": field("Lock", "Users cannot change the home page."),
    "Homepage.Additional": field("More pages", "More pages opened next to the home page.", { format: "url" }),
    "Homepage.StartPage": field("At start-up", "What Firefox shows when it starts.", {
      enum: options(
        ["none", "A blank page"],
        ["homepage", "The home page"],
        ["previous-session", "The previous session"],
        ["homepage-locked", "The home page (locked)"],
      ),
    }),
    "FirefoxHome.Search": field("Search", "Search box on Firefox Home."),
    "FirefoxHome.TopSites": field("Shortcuts", "Top sites on Firefox Home."),
    "FirefoxHome.SponsoredTopSites": field("Sponsored shortcuts", "Sponsored top sites."),
    "FirefoxHome.Highlights": field("Recent activity", "Highlights from history and bookmarks."),
    "FirefoxHome.Pocket": field("Recommended stories", "Stories recommended by Pocket."),
    "FirefoxHome.SponsoredPocket": field("Sponsored stories", "Sponsored stories."),
    "FirefoxHome.Snippets": field("Snippets", "Messages from Mozilla."),
    "FirefoxHome.Locked": field("Lock", "Users cannot change these choices."),
    "Bookmarks[].Title": field("Title", "Text of the bookmark."),
    "Bookmarks[].URL": field("URL", "Address of the bookmark.", { format: "url" }),
    "Bookmarks[].Favicon": field("Icon", "Icon URL of the bookmark.", {
      format: "url",
      schemes: ["http", "https", "data"],
      allowEmpty: true,
    }),
    "Bookmarks[].Placement": field("Placement", "Where the bookmark appears.", {
      enum: options(["toolbar", "Bookmarks toolbar"], ["menu", "Bookmarks menu"]),
    }),
    "Bookmarks[].Folder": field("Folder", "Folder to put the bookmark in (created when missing)."),
    "PictureInPicture.Enabled": field("Enable", "Shows the picture-in-picture toggle."),
    "PictureInPicture.Locked": field("Lock", "Users cannot change it."),
    "EncryptedMediaExtensions.Enabled": field("Enable", "Plays DRM-protected media."),
    "EncryptedMediaExtensions.Locked": field("Lock", "Users cannot change it."),
    "ExtensionSettings.*.restricted_domains": field(
      "Restricted domains",
      'Domains where add-ons may not run ("*" entry only).',
      { format: "domain" },
    ),
    "ExtensionSettings.*.default_area": field("Toolbar placement", "Where the add-on's button goes.", {
      enum: options(["navbar", "Toolbar"], ["menupanel", "Extensions menu"]),
    }),
    "ExtensionSettings.*.private_browsing": field(
      "In private windows",
      "Lets the add-on run in private windows.",
    ),
    "Preferences.*.Type": field("Type", "Type of Value when it is ambiguous.", {
      enum: options(["number", "Number"], ["boolean", "Boolean"], ["string", "Text"]),
    }),
    ...Object.assign(
      {},
      ...PERMISSION_KINDS.map((kind) =>
        permission(
          kind,
          {
            Camera: "the camera",
            Microphone: "the microphone",
            Location: "the location",
            Notifications: "notifications",
            Autoplay: "autoplaying media",
            VirtualReality: "virtual reality devices",
            ScreenShare: "screen sharing",
          }[kind]!,
        )
      ),
    ),
  },
  crossCheck(json, issues) {
    checkTlsRange(json, "SSLVersionMin", "SSLVersionMax", issues);
    requireWhen(json, {
      when: "Proxy.Mode",
      is: "autoConfig",
      needs: "Proxy.AutoConfigURL",
      hint: "set the URL of the PAC file",
    }, issues);
    requireWhen(json, {
      when: "Homepage.StartPage",
      is: "homepage-locked",
      needs: "Homepage.URL",
      hint: "set the home page to lock",
    }, issues);
  },
};
