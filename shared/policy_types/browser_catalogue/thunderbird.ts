/** Catalogue of the curated Thunderbird settings (see ../browser.ts for the shape). */
import {
  below,
  type BrowserCatalogue,
  checkTlsRange,
  field,
  forApp,
  options,
  pick,
  requireWhen,
  section,
} from "../browser.ts";
import { MOZILLA_DOWNLOAD_KEYS, MOZILLA_FIELDS, MOZILLA_UPDATE_KEYS } from "./mozilla.ts";

const M = forApp(MOZILLA_FIELDS, "Thunderbird");

/** The Thunderbird catalogue. */
export const THUNDERBIRD_CATALOGUE: BrowserCatalogue = {
  groups: [
    "Updates",
    "Privacy and telemetry",
    "Security",
    "Passwords",
    "Restrictions",
    "General",
    "Downloads",
    "Search",
    "Add-ons and preferences",
  ],
  fields: {
    ...section(
      "Updates",
      pick(M, MOZILLA_UPDATE_KEYS),
    ),
    ...section("Privacy and telemetry", {
      DisableTelemetry: M.DisableTelemetry,
      InAppNotification: field(
        "In-app messages",
        "Donation appeals, surveys and other messages inside Thunderbird.",
      ),
      NetworkPrediction: M.NetworkPrediction,
      CaptivePortal: M.CaptivePortal,
      Cookies: M.Cookies,
    }),
    ...section(
      "Security",
      pick(M, [
        "DisableSecurityBypass",
        "SSLVersionMin",
        "SSLVersionMax",
        "Certificates",
        "Authentication",
        "DNSOverHTTPS",
        "Proxy",
      ]),
    ),
    ...section(
      "Passwords",
      pick(M, [
        "PasswordManagerEnabled",
        "OfferToSaveLogins",
        "OfferToSaveLoginsDefault",
        "DisablePasswordReveal",
        "DisableMasterPasswordCreation",
        "PrimaryPassword",
      ]),
    ),
    ...section("Restrictions", {
      ...pick(M, [
        "BlockAboutAddons",
        "BlockAboutConfig",
        "BlockAboutProfiles",
        "BlockAboutSupport",
        "DisableDeveloperTools",
        "DisableSafeMode",
      ]),
      LocalFileLinks: {
        ...M.LocalFileLinks,
        deprecated:
          "Thunderbird 153 no longer lists this policy; nodes whose Thunderbird does not know it report it " +
          "as not in effect",
      },
    }),
    ...section(
      "General",
      pick(M, ["HardwareAcceleration", "DisableBuiltinPDFViewer", "PDFjs", "RequestedLocales"]),
    ),
    ...section(
      "Downloads",
      pick(M, MOZILLA_DOWNLOAD_KEYS),
    ),
    ...section("Search", pick(M, ["SearchEngines"])),
    ...section("Add-ons and preferences", {
      Extensions: { ...M.Extensions, merge: "per-member-union" },
      ExtensionSettings: M.ExtensionSettings,
      ExtensionUpdate: M.ExtensionUpdate,
      InstallAddonsPermission: field(
        "Add-on installation",
        "Whether users may install add-ons, and from which sites.",
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
    "InAppNotification.DonationEnabled": field("Donation appeals", "Show requests to donate to Thunderbird."),
    "InAppNotification.SurveyEnabled": field("Surveys", "Show requests to take part in surveys."),
    "InAppNotification.MessageEnabled": field("Messages", "Show other in-app messages."),
    "InAppNotification.Disabled": field("Turn off", "Turns every in-app notification off."),
    "InAppNotification.Enabled": field("Enable", "Not a Thunderbird setting.", {
      unsupported: "Thunderbird has no InAppNotification.Enabled; set InAppNotification.Disabled instead",
    }),
    "InAppNotification.Locked": field("Lock", "Not a Thunderbird setting.", {
      unsupported: "Thunderbird has no InAppNotification.Locked; remove it",
    }),
    "Cookies.Default": field("Allow cookies", "False blocks cookies from every site not in Allow."),
    "Cookies.AcceptThirdParty": field(
      "Third-party cookies",
      "Which third-party cookies Thunderbird accepts.",
      {
        enum: options(["always", "Always"], ["never", "Never"], ["from-visited", "From visited sites only"]),
      },
    ),
    "Cookies.ExpireAtSessionEnd": field(
      "Keep until Thunderbird closes",
      "Deletes cookies when Thunderbird closes.",
    ),
    "Cookies.AllowSession": field("Allow for the session", "Not a Thunderbird setting.", {
      unsupported:
        "Thunderbird has no Cookies.AllowSession; use Cookies.Allow with Cookies.ExpireAtSessionEnd",
    }),
    "Cookies.Behavior": field("Cookie behaviour", "Not a Thunderbird setting.", {
      unsupported: "Thunderbird has no Cookies.Behavior; use Cookies.Default and Cookies.AcceptThirdParty",
    }),
    "Preferences.*.Type": field("Type", "Not a Thunderbird setting.", {
      unsupported: "Thunderbird has no Preferences Type; give Value as a number, true/false or text",
    }),
    "InstallAddonsPermission.Allow": field("Allowed sites", "Origins from which add-ons may be installed.", {
      format: "origin",
    }),
    "InstallAddonsPermission.Default": field(
      "Allow installing",
      "False stops users from installing add-ons.",
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
  },
};
