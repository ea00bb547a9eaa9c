/**
 * The Proxy type's settings in every format a desktop reads them: one checked configuration (the
 * highest-priority valid policy's, whole) rendered as session environment lines, apt and dnf options, GNOME's
 * `org.gnome.system.proxy` keys, KDE's `[Proxy Settings]`, Firefox's `Proxy` policy and the Chromium family's
 * proxy policies. The Proxy enforcer writes the first five; the Firefox and Chrome enforcers write the browser
 * keys into their own policy files ({@linkcode firefoxProxy}, {@linkcode chromiumProxy}).
 *
 * Every value here was checked by the shared rules (host names, IP addresses, ports, an http(s) URL of plain URL
 * characters, host and network patterns), so it carries no quote, space, separator or line break of any of these
 * formats. Loopback (`localhost`, `127.0.0.0/8`, `::1`) is always reached directly: a proxy for it is never meant.
 *
 * @module
 */

import type { ProxyPolicy } from "../../../shared/gen/svc/policy/v1/proxy_pb.ts";
import { PolicyContentError } from "../../../shared/policy_types/errors.ts";
import { proxyType } from "../../../shared/policy_types/proxy.ts";
import type { KeyedValues } from "../../sync/key_merge.ts";
import type { CachedPolicy } from "../../sync/types.ts";
import type { BrowserCompanion } from "../browser_enforcer.ts";
import { checkedContent } from "../revalidate.ts";

/** Bypass entries every configuration has. */
export const ALWAYS_DIRECT: readonly string[] = ["localhost", "127.0.0.0/8", "::1"];

/** One proxy server. */
export interface Server {
  host: string;
  port: number;
}

/** A checked configuration: a PAC URL, or servers with bypass entries. */
export type ProxyConfig =
  | { kind: "pac"; url: string }
  | { kind: "manual"; http: Server; https: Server; bypass: string[] };

/**
 * Parses and checks a cached policy with the shared rules.
 *
 * @throws {PolicyContentError} naming the problems.
 */
export function proxyContent(policy: CachedPolicy): ProxyPolicy {
  return checkedContent(policy, proxyType);
}

/** The configuration of a checked message. */
export function proxyConfig(message: ProxyPolicy): ProxyConfig {
  const config = message.config;
  if (config.case === "pacUrl") return { kind: "pac", url: config.value };
  const http = { host: config.value!.http!.host, port: config.value!.http!.port };
  const https = config.value!.https
    ? { host: config.value!.https.host, port: config.value!.https.port }
    : http;
  return { kind: "manual", http, https, bypass: [...new Set([...ALWAYS_DIRECT, ...message.noProxy])] };
}

/** `host:port`, with an IPv6 address in brackets. */
export function hostPort(server: Server): string {
  return `${server.host.includes(":") ? `[${server.host}]` : server.host}:${server.port}`;
}

/** The proxy URL programs take from the environment and apt: `http://host:port/`. */
export function proxyUrl(server: Server): string {
  return `http://${hostPort(server)}/`;
}

/** A bypass entry as a domain suffix `.example.com` (environment, Firefox, KDE); hosts and networks unchanged. */
function dotDomain(entry: string): string {
  return entry.startsWith("*.") ? entry.slice(1) : entry;
}

/** A bypass entry as a wildcard `*.example.com` (GNOME, Chromium). */
function starDomain(entry: string): string {
  return entry.startsWith(".") ? `*${entry}` : entry;
}

/** The session environment: the variables curl, wget, git, pip and most command-line tools read. */
export function environmentLines(config: ProxyConfig): Map<string, string> | undefined {
  if (config.kind !== "manual") return undefined;
  const noProxy = config.bypass.map(dotDomain).join(",");
  return new Map([
    ["http_proxy", proxyUrl(config.http)],
    ["https_proxy", proxyUrl(config.https)],
    ["no_proxy", noProxy],
    ["HTTP_PROXY", proxyUrl(config.http)],
    ["HTTPS_PROXY", proxyUrl(config.https)],
    ["NO_PROXY", noProxy],
  ]);
}

/** apt options: the proxies, and `DIRECT` for each bypassed host name (apt matches whole host names only). */
export function aptOptions(config: ProxyConfig): Map<string, string> | undefined {
  if (config.kind !== "manual") return undefined;
  const options = new Map([
    ["Acquire::http::Proxy", proxyUrl(config.http)],
    ["Acquire::https::Proxy", proxyUrl(config.https)],
  ]);
  for (const entry of config.bypass) {
    if (/^[A-Za-z0-9.-]+$/.test(entry) && !entry.startsWith(".") && /[A-Za-z]/.test(entry)) {
      options.set(`Acquire::http::Proxy::${entry}`, "DIRECT");
      options.set(`Acquire::https::Proxy::${entry}`, "DIRECT");
    }
  }
  return options;
}

/** dnf's `proxy` option (dnf has no PAC support and no bypass list of its own). */
export function dnfProxy(config: ProxyConfig): string | undefined {
  return config.kind === "manual" ? `http://${hostPort(config.http)}` : undefined;
}

/** GNOME's keys, as `dconf path → GVariant text`; all are locked. */
export function gnomeKeys(config: ProxyConfig): Map<string, { type: string; value: unknown }> {
  if (config.kind === "pac") {
    return new Map([
      ["/system/proxy/mode", { type: "s", value: "auto" }],
      ["/system/proxy/autoconfig-url", { type: "s", value: config.url }],
    ]);
  }
  return new Map<string, { type: string; value: unknown }>([
    ["/system/proxy/mode", { type: "s", value: "manual" }],
    ["/system/proxy/http/host", { type: "s", value: config.http.host }],
    ["/system/proxy/http/port", { type: "i", value: config.http.port }],
    ["/system/proxy/https/host", { type: "s", value: config.https.host }],
    ["/system/proxy/https/port", { type: "i", value: config.https.port }],
    ["/system/proxy/ignore-hosts", { type: "as", value: config.bypass.map(starDomain) }],
  ]);
}

/** KDE's `[Proxy Settings]` keys in kioslaverc; all are immutable. */
export function kdeKeys(config: ProxyConfig): Map<string, string> {
  if (config.kind === "pac") {
    return new Map([["ProxyType", "2"], ["Proxy Config Script", config.url]]);
  }
  const kdeProxy = (s: Server) => `http://${s.host.includes(":") ? `[${s.host}]` : s.host} ${s.port}`;
  return new Map([
    ["ProxyType", "1"],
    ["httpProxy", kdeProxy(config.http)],
    ["httpsProxy", kdeProxy(config.https)],
    ["NoProxyFor", config.bypass.map(dotDomain).join(",")],
    ["ReversedException", "false"],
  ]);
}

/** Firefox's `Proxy` policy, locked. */
export function firefoxProxyKey(config: ProxyConfig): Record<string, unknown> {
  if (config.kind === "pac") return { Mode: "autoConfig", AutoConfigURL: config.url, Locked: true };
  return {
    Mode: "manual",
    HTTPProxy: hostPort(config.http),
    SSLProxy: hostPort(config.https),
    Passthrough: config.bypass.map(dotDomain).join(", "),
    Locked: true,
  };
}

/** The Chromium family's proxy policies. */
export function chromiumProxyKeys(config: ProxyConfig): Record<string, unknown> {
  if (config.kind === "pac") return { ProxyMode: "pac_script", ProxyPacUrl: config.url };
  const bypass = config.bypass.map((
    e,
  ) => (/^[0-9a-fA-F:]+$/.test(e) && e.includes(":") ? `[${e}]` : starDomain(e)));
  return {
    ProxyMode: "fixed_servers",
    ProxyServer: `http=${hostPort(config.http)};https=${hostPort(config.https)}`,
    ProxyBypassList: bypass.join(","),
  };
}

/** The first valid policy (the engine's order puts the highest priority first) and its configuration. */
export function winningProxy(
  policies: readonly CachedPolicy[],
): { policy: CachedPolicy; config: ProxyConfig } | undefined {
  for (const policy of policies) {
    try {
      return { policy, config: proxyConfig(proxyContent(policy)) };
    } catch (err) {
      if (!(err instanceof PolicyContentError)) throw err;
    }
  }
  return undefined;
}

function companion(keys: (config: ProxyConfig) => Record<string, unknown>): BrowserCompanion {
  return {
    type: proxyType.wireName,
    keyed(policies): Promise<KeyedValues[]> {
      const winner = winningProxy(policies);
      return Promise.resolve(winner ? [{ policy: winner.policy, values: keys(winner.config) }] : []);
    },
  };
}

/** The Proxy type's key in Firefox's policies file. */
export const firefoxProxy: BrowserCompanion = companion((config) => ({ Proxy: firefoxProxyKey(config) }));

/** The Proxy type's keys in the Chromium family's policy files. */
export const chromiumProxy: BrowserCompanion = companion(chromiumProxyKeys);
