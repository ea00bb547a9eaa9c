/**
 * Settings Firefox and Thunderbird share (same key, same meaning, same format), written once. `{app}` in a
 * label or description is replaced by the product name when a catalogue takes an entry ({@link forApp}).
 * Sources: the `policies-schema.json` each product ships in its omni.ja, and Mozilla's policy documentation.
 */
import { field, type FieldInfo, options } from "../browser.ts";

const TLS = options(["tls1", "TLS 1.0"], ["tls1.1", "TLS 1.1"], ["tls1.2", "TLS 1.2"], ["tls1.3", "TLS 1.3"]);

const HTTP_FILE = ["http", "https", "file"] as const;

/** The update settings both Mozilla applications honour, in display order. */
export const MOZILLA_UPDATE_KEYS = [
  "DisableAppUpdate",
  "AppAutoUpdate",
  "BackgroundAppUpdate",
  "ManualAppUpdateOnly",
  "AppUpdatePin",
  "AppUpdateURL",
  "DisableSystemAddonUpdate",
] as const;

/** The download settings both Mozilla applications honour, in display order. */
export const MOZILLA_DOWNLOAD_KEYS = [
  "PromptForDownloadLocation",
  "DefaultDownloadDirectory",
  "DownloadDirectory",
] as const;

/** Shared Mozilla entries, top level and nested. */
export const MOZILLA_FIELDS: Record<string, FieldInfo> = {
  // Updates
  DisableAppUpdate: field("Block updates", "Stops {app} from updating itself."),
  AppAutoUpdate: field("Install updates automatically", "Downloads and installs updates without asking."),
  BackgroundAppUpdate: field(
    "Update in the background",
    "Lets {app} update while it is not running (where the platform supports it).",
  ),
  ManualAppUpdateOnly: field(
    "Manual updates only",
    "Never updates by itself and never tells users about updates; they update by hand.",
  ),
  AppUpdatePin: field(
    "Pin to version",
    'Keeps {app} from updating past a version prefix, e.g. "128." stays on 128.x.',
    { format: "version_prefix" },
  ),
  AppUpdateURL: field("Update server URL", "Replaces the address {app} checks for updates.", {
    format: "url",
    schemes: ["https"],
  }),
  DisableSystemAddonUpdate: field(
    "Block system add-on updates",
    "Stops {app} from installing and updating its built-in system add-ons.",
  ),

  // Privacy and telemetry
  DisableTelemetry: field(
    "Turn off telemetry",
    "Stops {app} from sending usage and performance data to Mozilla.",
  ),
  NetworkPrediction: field(
    "Network prediction",
    "Lets {app} prefetch DNS and pre-connect to likely next pages; false turns it off.",
  ),
  CaptivePortal: field(
    "Captive portal detection",
    "Detects Wi-Fi login pages by contacting Mozilla; false turns detection off.",
  ),
  Cookies: field("Cookies", "Which sites may store cookies and how third-party cookies are treated."),
  "Cookies.Allow": field(
    "Always allow",
    "Origins that may always set cookies, e.g. https://intranet.example.",
    {
      format: "origin",
    },
  ),
  "Cookies.Block": field(
    "Always block",
    "Origins that may never set cookies; their existing cookies are deleted.",
    {
      format: "origin",
    },
  ),
  "Cookies.Locked": field("Lock", "Users cannot change the cookie preferences."),

  // Security
  DisableSecurityBypass: field(
    "Block security warning bypass",
    "Stops users from clicking through certificate and Safe Browsing warnings.",
  ),
  "DisableSecurityBypass.InvalidCertificate": field(
    "Certificate errors",
    "Users cannot add an exception for an invalid certificate.",
  ),
  "DisableSecurityBypass.SafeBrowsing": field(
    "Safe Browsing warnings",
    "Users cannot continue to a site blocked as dangerous.",
  ),
  SSLVersionMin: field("Minimum TLS version", "Oldest TLS version {app} accepts.", { enum: TLS }),
  SSLVersionMax: field("Maximum TLS version", "Newest TLS version {app} offers.", { enum: TLS }),
  Certificates: field(
    "Certificates",
    "Trust enterprise roots from the system and install extra certificates.",
    { merge: "per-member-union" },
  ),
  "Certificates.ImportEnterpriseRoots": field(
    "Use system root certificates",
    "Trusts the root certificates installed on the system in addition to {app}'s own.",
  ),
  "Certificates.Install": field(
    "Install certificates",
    "Certificate files (.der or .pem) to add, by file name in a searched directory or by absolute path.",
  ),
  Authentication: field(
    "Integrated authentication",
    "Sites allowed to use Kerberos (SPNEGO) or NTLM single sign-on.",
  ),
  "Authentication.SPNEGO": field(
    "Kerberos (SPNEGO) sites",
    "Host names or URLs allowed to use Kerberos, e.g. example.com.",
  ),
  "Authentication.Delegated": field(
    "Credential delegation",
    "Host names or URLs to which {app} may delegate the user's Kerberos credentials.",
  ),
  "Authentication.NTLM": field("NTLM sites", "Host names or URLs allowed to use NTLM."),
  "Authentication.AllowNonFQDN": field(
    "Allow short host names",
    "Allow single sign-on with host names without a domain.",
  ),
  "Authentication.AllowNonFQDN.SPNEGO": field("Kerberos", "Allow Kerberos with short host names."),
  "Authentication.AllowNonFQDN.NTLM": field("NTLM", "Allow NTLM with short host names."),
  "Authentication.AllowProxies": field("Allow through proxies", "Allow single sign-on with proxy servers."),
  "Authentication.AllowProxies.SPNEGO": field("Kerberos", "Allow Kerberos authentication to proxies."),
  "Authentication.AllowProxies.NTLM": field("NTLM", "Allow NTLM authentication to proxies."),
  "Authentication.Locked": field("Lock", "Users cannot change the authentication settings."),
  "Authentication.PrivateBrowsing": field(
    "In private windows",
    "Allow single sign-on in private windows too.",
  ),
  DNSOverHTTPS: field("DNS over HTTPS", "Resolve names through an encrypted DNS-over-HTTPS provider."),
  "DNSOverHTTPS.Enabled": field("Enable", "Turns DNS over HTTPS on or off."),
  "DNSOverHTTPS.ProviderURL": field("Provider URL", "The DNS-over-HTTPS resolver to use.", {
    format: "url",
    schemes: ["https"],
  }),
  "DNSOverHTTPS.Locked": field("Lock", "Users cannot change the DNS-over-HTTPS settings."),
  "DNSOverHTTPS.ExcludedDomains": field(
    "Excluded domains",
    "Domains resolved by the system resolver instead, e.g. corp.example.",
    { format: "domain" },
  ),
  Proxy: field("Proxy", "How {app} connects to the network through a proxy."),
  "Proxy.Mode": field("Mode", "Where the proxy configuration comes from.", {
    enum: options(
      ["none", "No proxy"],
      ["system", "Use the system proxy settings"],
      ["manual", "Manual proxy configuration"],
      ["autoDetect", "Auto-detect (WPAD)"],
      ["autoConfig", "Automatic configuration URL (PAC)"],
    ),
  }),
  "Proxy.Locked": field("Lock", "Users cannot change the proxy settings."),
  "Proxy.HTTPProxy": field("HTTP proxy", "host:port of the HTTP proxy (manual mode).", {
    format: "host_port",
  }),
  "Proxy.UseHTTPProxyForAllProtocols": field("Use for all protocols", "Use the HTTP proxy for HTTPS too."),
  "Proxy.SSLProxy": field("HTTPS proxy", "host:port of the HTTPS proxy (manual mode).", {
    format: "host_port",
  }),
  "Proxy.SOCKSProxy": field("SOCKS host", "host:port of the SOCKS proxy (manual mode).", {
    format: "host_port",
  }),
  "Proxy.SOCKSVersion": field("SOCKS version", "SOCKS protocol version.", {
    enum: options([4, "SOCKS v4"], [5, "SOCKS v5"]),
  }),
  "Proxy.Passthrough": field(
    "No proxy for",
    "Comma-separated hosts that bypass the proxy, e.g. localhost,.corp.example.",
  ),
  "Proxy.AutoConfigURL": field("Configuration URL", "Address of the proxy auto-configuration (PAC) file.", {
    format: "url",
    schemes: HTTP_FILE,
    allowEmpty: true,
  }),
  "Proxy.AutoLogin": field(
    "Log in without asking",
    "Do not prompt for authentication when a password is saved.",
  ),
  "Proxy.UseProxyForDNS": field("Proxy DNS", "Resolve names through the SOCKS proxy."),

  // Passwords
  PasswordManagerEnabled: field(
    "Password manager",
    "Lets users save passwords; false turns the password manager off.",
  ),
  OfferToSaveLogins: field(
    "Offer to save passwords",
    "Whether {app} offers to save passwords (users cannot change it).",
  ),
  OfferToSaveLoginsDefault: field(
    "Offer to save passwords (default)",
    "Default of the offer to save passwords; users can change it.",
  ),
  DisablePasswordReveal: field(
    "Hide saved passwords",
    "Users cannot reveal saved passwords in the password list.",
  ),
  DisableMasterPasswordCreation: field("Block primary password", "Users cannot create a primary password."),
  PrimaryPassword: field(
    "Require primary password",
    "Forces users to set a primary password (true) or forbids it (false).",
  ),

  // Restrictions
  BlockAboutAddons: field("Block add-ons manager", "Blocks about:addons, so users cannot manage add-ons."),
  BlockAboutConfig: field(
    "Block about:config",
    "Blocks about:config, so users cannot change hidden preferences.",
  ),
  BlockAboutProfiles: field(
    "Block about:profiles",
    "Blocks about:profiles, so users cannot switch or create profiles.",
  ),
  BlockAboutSupport: field("Block troubleshooting page", "Blocks about:support."),
  DisableDeveloperTools: field("Block developer tools", "Removes the developer tools."),
  DisableSafeMode: field("Block troubleshoot mode", "Users cannot restart {app} with add-ons disabled."),
  LocalFileLinks: field("Local file links", "Origins allowed to link to local files (file:// URLs).", {
    format: "origin",
  }),

  // General
  HardwareAcceleration: field("Hardware acceleration", "False turns hardware (GPU) acceleration off."),
  DisableBuiltinPDFViewer: field(
    "Turn off built-in PDF viewer",
    "Opens PDF files in another application instead.",
  ),
  PDFjs: field("PDF viewer", "Settings of the built-in PDF viewer."),
  "PDFjs.Enabled": field("Enable", "False turns the built-in PDF viewer off."),
  "PDFjs.EnablePermissions": field(
    "Honour PDF permissions",
    "Respects document permissions such as no-copy.",
  ),
  RequestedLocales: field("Languages", "User interface languages in order of preference, e.g. de, en-US.", {
    format: "locale",
  }),

  // Downloads
  PromptForDownloadLocation: field("Ask where to save", "Asks where to save every download."),
  DefaultDownloadDirectory: field(
    "Default download folder",
    "Folder downloads go to by default; users can change it. ${home} is the home folder.",
    { format: "directory" },
  ),
  DownloadDirectory: field(
    "Download folder (locked)",
    "Folder downloads go to; users cannot change it. ${home} is the home folder.",
    { format: "directory" },
  ),

  // Search
  SearchEngines: field("Search engines", "Add, remove and choose search engines."),
  "SearchEngines.Add": field("Add", "Search engines to add."),
  "SearchEngines.Add[].Name": field("Name", "Name shown in the search engine list."),
  "SearchEngines.Add[].URLTemplate": field(
    "Search URL",
    "URL with {searchTerms} where the search text goes.",
    {
      format: "search_url",
    },
  ),
  "SearchEngines.Add[].Method": field("Method", "HTTP method of the search request.", {
    enum: options(["GET", "GET"], ["POST", "POST"]),
  }),
  "SearchEngines.Add[].IconURL": field("Icon URL", "Icon of the search engine.", {
    format: "url",
    schemes: ["http", "https", "data"],
    allowEmpty: true,
  }),
  "SearchEngines.Add[].Alias": field("Keyword", "Keyword that selects this engine in the address bar."),
  "SearchEngines.Add[].Description": field("Description", "Description of the search engine."),
  "SearchEngines.Add[].PostData": field("POST data", "Body of a POST search, with {searchTerms}."),
  "SearchEngines.Add[].SuggestURLTemplate": field(
    "Suggestions URL",
    "URL for search suggestions, with {searchTerms}.",
    { format: "search_url" },
  ),
  "SearchEngines.Add[].Encoding": field("Encoding", "Character encoding of the query, e.g. UTF-8."),
  "SearchEngines.Default": field("Default engine", "Name of the default search engine."),
  "SearchEngines.DefaultPrivate": field(
    "Default in private windows",
    "Name of the default engine in private windows.",
  ),
  "SearchEngines.PreventInstalls": field(
    "Block adding engines",
    "Users cannot install search engines from web pages.",
  ),
  "SearchEngines.Remove": field("Remove", "Names of built-in search engines to hide."),

  // Add-ons and preferences
  Extensions: field("Add-ons", "Install, uninstall and lock add-ons (see also ExtensionSettings)."),
  "Extensions.Install": field(
    "Install",
    "Add-on URLs or file paths to install, e.g. https://addons.example/x.xpi.",
    {
      format: "url",
      schemes: HTTP_FILE,
    },
  ),
  "Extensions.Uninstall": field("Uninstall", "Ids of add-ons to remove.", { format: "addon_id" }),
  "Extensions.Locked": field("Lock", "Ids of add-ons users cannot disable or remove.", {
    format: "addon_id",
  }),
  ExtensionSettings: field(
    "Add-on management",
    'Per add-on id (or "*" for every add-on): allow, block or force-install, and where from.',
    { keyFormat: "addon_id_or_star", merge: "per-entry" },
  ),
  "ExtensionSettings.*.installation_mode": field(
    "Installation",
    "Whether the add-on may be, must be or cannot be installed.",
    {
      enum: options(
        ["allowed", "Allowed"],
        ["blocked", "Blocked"],
        ["force_installed", "Force-installed (users cannot remove it)"],
        ["normal_installed", "Installed (users can disable it)"],
      ),
    },
  ),
  "ExtensionSettings.*.install_url": field("Install URL", "Where to download the add-on from.", {
    format: "url",
    schemes: HTTP_FILE,
  }),
  "ExtensionSettings.*.blocked_install_message": field(
    "Blocked message",
    "Text shown when a user tries to install a blocked add-on.",
  ),
  "ExtensionSettings.*.install_sources": field(
    "Install sources",
    'Match patterns of sites add-ons may be installed from ("*" entry only).',
    { format: "match_pattern" },
  ),
  "ExtensionSettings.*.allowed_types": field(
    "Allowed types",
    'Add-on types users may install ("*" entry only).',
    {
      enum: options(["extension", "Extension"], ["theme", "Theme"], ["dictionary", "Dictionary"], [
        "locale",
        "Language pack",
      ]),
    },
  ),
  "ExtensionSettings.*.updates_disabled": field("Block updates", "Stops the add-on from updating."),
  ExtensionUpdate: field("Add-on updates", "False stops all add-ons from updating."),
  Preferences: field(
    "Preferences",
    "Sets and optionally locks about:config preferences, keyed by preference name.",
    { keyFormat: "pref_name", merge: "per-entry" },
  ),
  "Preferences.*.Value": field("Value", "The preference value (number, true/false or text)."),
  "Preferences.*.Status": field("Status", "How the value applies.", {
    enum: options(
      ["default", "Default (users can change it)"],
      ["locked", "Locked"],
      ["user", "User value (set once)"],
      ["clear", "Clear the user value"],
    ),
  }),
};
