/**
 * Value formats of browser policy settings, named by {@link FieldFormat} in the catalogues, each with the
 * checker the shared validation runs and the agent runs again. A checker returns `undefined` when the value is
 * acceptable, or a sentence that says what is wrong and how to write it instead.
 *
 * The checks are as strict as the browsers' own documented formats and no stricter: a value a browser accepts
 * must never be refused here.
 */
import { type Checker, singleLine, urlWithScheme } from "../sanitizers.ts";

/** Schemes whose URLs carry no host (`file:///opt/a.xpi`, `data:image/png;base64,…`). */
const HOSTLESS = new Set(["file", "data"]);

/** A URL with one of `schemes`; a host is required except for file: and data: URLs. */
function url(schemes: readonly string[]): Checker {
  const withHost = urlWithScheme(schemes);
  return (value) => {
    const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(value)?.[1]?.toLowerCase();
    if (scheme && HOSTLESS.has(scheme) && schemes.includes(scheme)) {
      const bad = singleLine(value);
      if (bad) return bad;
      return URL.canParse(value) ? undefined : `must be a valid URL (${schemes.join(" or ")})`;
    }
    return withHost(value);
  };
}

/**
 * Names of the formats a catalogue field can declare. For a list field the format applies to every item; for
 * a map field {@link FieldInfo.keyFormat} applies to the keys.
 */
export type FieldFormat =
  /** An absolute URL with a host; schemes from the field's `schemes` (default http and https). */
  | "url"
  /** A URL template with `{searchTerms}` (search engines); schemes as for `url`. */
  | "search_url"
  /** Chrome's URL filter (URLBlocklist): `example.com`, `.example.com`, `https://example.com/path`, `*`. */
  | "url_filter"
  /** Chrome's content-setting pattern: `[*.]example.com`, `https://example.com:443`, `*`. */
  | "url_pattern"
  /** A WebExtension match pattern: `<all_urls>` or `scheme://host/path` with `*` wildcards. */
  | "match_pattern"
  /** A site origin `https://example.com` (path, if any, only `/`), or a `file://` URL. */
  | "origin"
  /** A Chromium extension id: 32 letters a–p. */
  | "extension_id"
  /** A Chromium extension id, `*` meaning every extension. */
  | "extension_id_or_star"
  /** An ExtensionInstallForcelist entry: an extension id, optionally `;` and its update URL. */
  | "extension_forcelist_entry"
  /** An ExtensionSettings key: an extension id, `*`, or an update URL (for every extension from it). */
  | "extension_settings_key"
  /** A Mozilla add-on id: `name@example.com` or `{GUID}`. */
  | "addon_id"
  /** A Mozilla add-on id or `*` (the defaults of every add-on). */
  | "addon_id_or_star"
  /** `host` or `host:port` (proxies). */
  | "host_port"
  /** A DNS name, optionally starting with `*.` or `.`. */
  | "domain"
  /** Comma-separated host names or patterns (authentication allowlists). */
  | "host_list"
  /** Comma-separated values from the field's enum. */
  | "comma_list"
  /** A BCP 47 language tag such as `en-US`. */
  | "locale"
  /** An absolute directory path; may start with a browser variable such as `${home}`. */
  | "directory"
  /** A version prefix such as `128.` or `128.0.` (update pinning). */
  | "version_prefix"
  /** A regular expression. */
  | "regex"
  /** A string holding a JSON object (Chrome's AutoSelectCertificateForUrls entries). */
  | "json_object"
  /** A preference name such as `browser.startup.page` (about:config). */
  | "pref_name"
  /** Space-separated `https://` DNS-over-HTTPS URI templates. */
  | "doh_templates";

const MAX_PATTERN = 2048;
// deno-lint-ignore no-control-regex
const WHITESPACE_OR_CONTROL = /[\s\u0000-\u001f\u007f]/;
const SCHEME = /^(\*|[A-Za-z][A-Za-z0-9+.-]*)$/;

function token(value: string, what: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (value.length === 0) return `must not be empty; write ${what}`;
  if (value.length > MAX_PATTERN) return `must be at most ${MAX_PATTERN} characters`;
  if (WHITESPACE_OR_CONTROL.test(value)) return `must not contain spaces; write ${what}`;
  return undefined;
}

const CHROMIUM_ID = /^[a-p]{32}$/;
const MOZILLA_ID =
  /^(\{[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\}|[A-Za-z0-9._+-]*@[A-Za-z0-9._-]+)$/;
const HOST =
  /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*)$/;
const DOMAIN =
  /^(\*\.|\.)?[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$/;
const LOCALE = /^[A-Za-z]{2,3}([_-][A-Za-z0-9]{1,8})*$/;

function validPort(text: string): boolean {
  return /^\d{1,5}$/.test(text) && Number(text) >= 1 && Number(text) <= 65535;
}

function urlPattern(value: string): string | undefined {
  const bad = token(value, "a pattern such as example.com, [*.]example.com or https://example.com/path");
  if (bad) return bad;
  if (/["<>\\^`{|}]/.test(value)) return "must not contain quotes, angle brackets, backslashes or braces";
  const sep = value.indexOf("://");
  if (sep >= 0 && !SCHEME.test(value.slice(0, sep))) {
    return `has an invalid scheme "${value.slice(0, sep)}"; use a scheme such as https, or *`;
  }
  return undefined;
}

const URL_FILTER_HINT =
  "a URL filter such as example.com (with subdomains), .example.com (exactly this host), https://example.com/path or *";

/**
 * Chrome's URL filter format `[scheme://][.]host[:port][/path][?query]`: `*` may stand for the whole filter,
 * the scheme or the whole host, nowhere else in the host, and the port is a number (checked against Debian's
 * Chromium, whose loader reports "Policy parsing error" otherwise).
 */
function urlFilter(value: string): string | undefined {
  const bad = token(value, URL_FILTER_HINT) ?? urlPattern(value);
  if (bad) return bad;
  // "*" alone, or "scheme:*" (a dot would make it a host with port "*", which the loader refuses).
  if (value === "*" || /^[A-Za-z][A-Za-z0-9+-]*:\*$/.test(value)) return undefined;
  const sep = value.indexOf("://");
  const scheme = sep >= 0 ? value.slice(0, sep).toLowerCase() : "";
  const rest = sep >= 0 ? value.slice(sep + 3) : value;
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^:/?#\[\]]*)(?::([^/?#]*))?([/?#].*)?$/.exec(rest);
  if (!m) return `must be ${URL_FILTER_HINT}`;
  const [, host, portText] = m;
  if (host === "" && scheme !== "file") return `needs a host; write ${URL_FILTER_HINT}`;
  if (host !== "*" && host.includes("*")) {
    return "may use * only for a whole host: write example.com (subdomains are included) instead of " +
      "*.example.com, or .example.com for exactly that host";
  }
  if (portText !== undefined && !validPort(portText)) {
    return "port must be a number between 1 and 65535 (no *)";
  }
  return undefined;
}

function matchPattern(value: string): string | undefined {
  const bad = token(value, "a match pattern such as *://*.example.com/*");
  if (bad) return bad;
  if (value === "<all_urls>") return undefined;
  const m = /^(\*|https?|wss?|file|ftp):\/\/(\*|\*\.[^/*]+|[^/*]+)?(\/.*)$/.exec(value);
  if (!m) {
    return "must be a match pattern scheme://host/path (scheme *, http, https, file or ftp; host *, *.example.com or example.com; path required, e.g. /*), or <all_urls>";
  }
  if (m[1] !== "file" && m[2] === undefined) return "needs a host (use * for any host)";
  return undefined;
}

function origin(value: string): string | undefined {
  const bad = token(value, "an origin such as https://example.com");
  if (bad) return bad;
  if (/^file:\/\//i.test(value)) return undefined;
  const problem = urlWithScheme(["http", "https"])(value);
  if (problem) return problem;
  const url = new URL(value);
  if (url.pathname !== "/" || url.search || url.hash || url.username || url.password) {
    return `must be an origin only (scheme://host[:port]), e.g. ${url.protocol}//${url.host}`;
  }
  return undefined;
}

function extensionId(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  return CHROMIUM_ID.test(value)
    ? undefined
    : "must be an extension id: 32 lowercase letters a to p (from the extension's store page or chrome://extensions)";
}

function forcelistEntry(value: string): string | undefined {
  const [id, updateUrl, ...rest] = value.split(";");
  const bad = extensionId(id);
  if (bad) return `${bad}, optionally followed by ";" and the update URL`;
  if (rest.length > 0) return 'must be "<extension id>" or "<extension id>;<update URL>"';
  if (updateUrl === undefined) return undefined;
  const problem = urlWithScheme(["http", "https"])(updateUrl);
  return problem ? `update URL after ";" ${problem}` : undefined;
}

function settingsKey(value: string): string | undefined {
  if (value === "*" || CHROMIUM_ID.test(value)) return undefined;
  if (/^https?:\/\//.test(value)) {
    const problem = urlWithScheme(["http", "https"])(value);
    return problem ? `update URL key ${problem}` : undefined;
  }
  return 'must be an extension id (32 letters a to p), "*" for every extension, or an update URL';
}

function addonId(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  return MOZILLA_ID.test(value) && value.length <= 255
    ? undefined
    : "must be an add-on id such as uBlock0@raymondhill.net or {ec8030f7-c20a-464f-9b0e-13a3a9e97384} (see about:support)";
}

function hostPort(value: string): string | undefined {
  const bad = token(value, "host:port, e.g. proxy.example.com:3128");
  if (bad) return bad;
  const m = /^(.*?)(?::(\d+))?$/.exec(value)!;
  if (!HOST.test(m[1])) return "must be host or host:port, e.g. proxy.example.com:3128";
  if (m[2] !== undefined && !validPort(m[2])) return "port must be between 1 and 65535";
  return undefined;
}

function domain(value: string): string | undefined {
  const bad = token(value, "a domain such as example.com");
  if (bad) return bad;
  return DOMAIN.test(value) && value.length <= 253
    ? undefined
    : "must be a domain name such as example.com (optionally *.example.com or .example.com)";
}

function hostList(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  for (const item of value.split(",").map((s) => s.trim())) {
    if (item === "") return 'must be host names separated by commas, e.g. "*.example.com,intranet"';
    if (/[\s"'<>\\]/.test(item)) {
      return `"${item}" is not a host name or pattern; separate entries with commas, e.g. "*.example.com,intranet"`;
    }
  }
  return undefined;
}

function locale(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  return LOCALE.test(value) ? undefined : "must be a language tag such as en-US or de";
}

function directory(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  if (!/^(\/|\$\{[A-Za-z_]+\}|~)/.test(value)) {
    return "must be an absolute path such as /srv/downloads, or start with a variable such as ${home}";
  }
  if (value.split("/").some((p) => p === "..")) return "must not contain '..' components";
  return value.length > 4096 ? "must be at most 4096 characters" : undefined;
}

function versionPrefix(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  return /^\d{1,4}\.(\d{1,4}\.)?$/.test(value)
    ? undefined
    : 'must be a version prefix ending in ".", e.g. "128." or "128.0."';
}

function regex(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  try {
    new RegExp(value);
    return undefined;
  } catch (err) {
    return `must be a valid regular expression (${(err as Error).message})`;
  }
}

function jsonObject(value: string): string | undefined {
  try {
    const parsed = JSON.parse(value);
    if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) return undefined;
  } catch {
    // reported below
  }
  return 'must be a JSON object as text, e.g. {"pattern": "https://[*.]example.com", "filter": {}}';
}

function prefName(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  return /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_{}@-]+)+$/.test(value) && value.length <= 255
    ? undefined
    : "must be a preference name such as browser.startup.page (letters, digits, '.', '_', '-')";
}

function searchUrl(schemes: readonly string[]): Checker {
  return (value) => {
    const problem = url(schemes)(value.replaceAll("{searchTerms}", "x"));
    if (problem) return problem;
    return value.includes("{searchTerms}")
      ? undefined
      : "must contain {searchTerms} where the search text goes";
  };
}

function dohTemplates(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  for (const item of value.trim().split(/ +/)) {
    const problem = urlWithScheme(["https"])(item.replace(/\{\?dns\}/g, ""));
    if (problem) return `"${item}": ${problem}; separate several templates with spaces`;
  }
  return undefined;
}

/** The checker of a format; `schemes` applies to URL formats, `allowed` to `comma_list`. */
export function formatChecker(
  format: FieldFormat,
  options: { schemes?: readonly string[]; allowed?: readonly (string | number)[] } = {},
): Checker {
  const schemes = options.schemes ?? ["http", "https"];
  switch (format) {
    case "url":
      return url(schemes);
    case "search_url":
      return searchUrl(schemes);
    case "url_filter":
      return urlFilter;
    case "url_pattern":
      return urlPattern;
    case "match_pattern":
      return matchPattern;
    case "origin":
      return origin;
    case "extension_id":
      return extensionId;
    case "extension_id_or_star":
      return (v) => v === "*" ? undefined : extensionId(v) && `${extensionId(v)}, or "*" for every extension`;
    case "extension_forcelist_entry":
      return forcelistEntry;
    case "extension_settings_key":
      return settingsKey;
    case "addon_id":
      return addonId;
    case "addon_id_or_star":
      return (v) => v === "*" ? undefined : addonId(v) && `${addonId(v)}, or "*" for every add-on`;
    case "host_port":
      return hostPort;
    case "domain":
      return domain;
    case "host_list":
      return hostList;
    case "comma_list": {
      const allowed = (options.allowed ?? []).map(String);
      return (value) => {
        const bad = singleLine(value);
        if (bad) return bad;
        const unknown = value.split(",").map((s) => s.trim()).filter((s) => !allowed.includes(s));
        return unknown.length === 0
          ? undefined
          : `"${unknown[0]}" is not one of ${
            allowed.map((a) => JSON.stringify(a)).join(", ")
          }; separate several with commas`;
      };
    }
    case "locale":
      return locale;
    case "directory":
      return directory;
    case "version_prefix":
      return versionPrefix;
    case "regex":
      return regex;
    case "json_object":
      return jsonObject;
    case "pref_name":
      return prefName;
    case "doh_templates":
      return dohTemplates;
  }
}
