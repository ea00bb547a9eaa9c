/**
 * Proxy: one proxy configuration for every place a desktop reads one (see proxy.proto). The highest-priority
 * policy's whole configuration applies (merge `priority_merge` with one setting).
 *
 * Hosts, ports, the PAC URL and the no-proxy entries end up in the session environment, apt and dnf
 * configuration, GSettings values, KDE's kioslaverc and browser policy files, so each is checked to be exactly
 * what it claims: a host name or IP address, a port, an http(s) URL, a host or network pattern. Credentials are
 * refused everywhere (all those files are world-readable).
 */
import { type ProxyPolicy, ProxyPolicySchema, type ProxyServer } from "../gen/svc/policy/v1/proxy_pb.ts";
import { defineType } from "./define.ts";
import { cidr, ipAddress, type IssueList, maxLength, singleLine, urlWithScheme } from "./sanitizers.ts";

/** Most no-proxy entries a policy may list. */
export const MAX_NO_PROXY = 256;
/** Longest PAC URL. */
export const MAX_PAC_URL = 2048;

const LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;
const CREDENTIALS =
  "must not contain credentials: svc never stores proxy passwords, because every file that carries the proxy " +
  "is readable by all users; use a proxy that authenticates users by Kerberos or by address";

/** A DNS host name: dot-separated labels of letters, digits and inner '-', at most 253 characters. */
function hostName(value: string): boolean {
  return value.length <= 253 && value.split(".").every((l) => LABEL.test(l));
}

/** A proxy host: a host name or an IPv4 or IPv6 address, nothing else (no scheme, port or credentials). */
export function proxyHost(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (value.includes("@")) return CREDENTIALS;
  if (value.includes("://")) return "must be a host name or address without a scheme (no http://)";
  if (/^[\d.]+$/.test(value)) return ipAddress(value) ? "must be a valid IPv4 address" : undefined;
  if (hostName(value) || (value.includes(":") && ipAddress(value) === undefined)) return undefined;
  return "must be a host name such as proxy.example.com or an IP address (no port: give it in port)";
}

/** The characters RFC 3986 allows in a URL (anything else must be percent-encoded). */
const URL_CHARS = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/;

/**
 * A PAC URL: http or https, no credentials, only the characters RFC 3986 allows unencoded (no spaces, quotes,
 * backslashes or invisible characters that programs would read differently).
 */
export function pacUrl(value: string): string | undefined {
  const problem = maxLength(MAX_PAC_URL)(value) ?? singleLine(value) ??
    (URL_CHARS.test(value) ? undefined : "must contain only URL characters: percent-encode the others") ??
    urlWithScheme(["http", "https"])(value);
  if (problem) return problem;
  const url = new URL(value);
  return url.username || url.password ? CREDENTIALS : undefined;
}

/**
 * One no-proxy entry: a host name (`intranet.example.com`), a domain with everything below it (`.example.com`
 * or `*.example.com`), an IP address or a network (`10.0.0.0/8`, `fd00::/8`).
 */
export function noProxyEntry(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (value.includes("@")) return CREDENTIALS;
  const domain = value.replace(/^\*?\./, "");
  if (hostName(domain) || cidr(value) === undefined) return undefined;
  return "must be a host name, a domain (.example.com or *.example.com), an IP address or a network " +
    "(10.0.0.0/8)";
}

function checkServer(issues: IssueList, field: string, server: ProxyServer | undefined, required: boolean) {
  if (!server) {
    if (required) issues.add(field, "is required: give the proxy's host and port");
    return;
  }
  if (!server.host) issues.add(`${field}.host`, "is required");
  else issues.check(`${field}.host`, server.host, proxyHost);
  if (server.port < 1 || server.port > 65535) {
    issues.add(`${field}.port`, "must be a port between 1 and 65535");
  }
}

/** The Proxy policy type. */
export const proxyType = defineType<ProxyPolicy>({
  wireName: "Proxy",
  label: "Proxy",
  description: "One proxy for the session, apt, dnf, GNOME, KDE and the browsers.",
  schema: ProxyPolicySchema,
  typedContentCase: "proxyPolicy",
  merge: "priority_merge",
  names: "proto",
  check(message, issues) {
    const config = message.config;
    if (config.case === undefined) {
      issues.add("", "policy content needs at least one setting: set manual (host and port) or pac_url");
    } else if (config.case === "manual") {
      checkServer(issues, "manual.http", config.value.http, true);
      checkServer(issues, "manual.https", config.value.https, false);
    } else {
      if (!config.value) issues.add("pac_url", "is required");
      else issues.check("pac_url", config.value, pacUrl);
      if (message.noProxy.length > 0) {
        issues.add(
          "no_proxy",
          "applies to a manual proxy only: the PAC file decides what bypasses the proxy",
        );
      }
    }
    if (message.noProxy.length > MAX_NO_PROXY) {
      issues.add("no_proxy", `must list at most ${MAX_NO_PROXY} entries`);
    } else {
      issues.each("no_proxy", message.noProxy, noProxyEntry);
    }
  },
});
