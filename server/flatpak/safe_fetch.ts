/**
 * Outbound HTTP for the Flatpak catalogue, hardened against server-side request forgery: only http(s);
 * the host name is resolved once and every address must be public (no loopback, private, link-local,
 * carrier-grade NAT, multicast or reserved ranges) unless the configuration allows private targets; the
 * connection goes to the address that was checked (DNS pinned through the request's `lookup`, so a
 * second resolution cannot switch it to an internal address), the TLS name stays the host's; redirects
 * are followed at most three times, each checked the same way; the body is cut off at a size limit and
 * the whole exchange at a time limit.
 *
 * @module
 */

import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";

/** Limits of one fetch. */
export interface FetchLimits {
  /** Allow loopback and private addresses (tests, sites with an internal mirror). */
  allowPrivate: boolean;
  maxBytes: number;
  timeoutMs: number;
}

/** A refused or failed fetch; the message names the URL and the reason. */
export class FetchRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FetchRefused";
  }
}

function v4Parts(address: string): number[] {
  return address.split(".").map(Number);
}

/** Whether an IPv4 address is outside the public unicast space. */
function privateV4(address: string): boolean {
  const [a, b, c] = v4Parts(address);
  return a === 0 || a === 10 || a === 127 || (a === 100 && b >= 64 && b <= 127) || (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 192 && b === 0 && c === 0) ||
    (a === 198 && (b === 18 || b === 19)) || a >= 224;
}

/** Whether an IP address (v4 or v6) is outside the public unicast space. */
export function isPrivateAddress(address: string): boolean {
  if (isIP(address) === 4) return privateV4(address);
  const lower = address.toLowerCase().replace(/^\[|\]$/g, "");
  const mapped = /^(?:0*:)*(?:ffff:)?(\d+\.\d+\.\d+\.\d+)$/.exec(lower) ??
    /^64:ff9b::(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return privateV4(mapped[1]);
  if (lower === "::" || lower === "::1") return true;
  const first = parseInt(lower.split(":")[0] || "0", 16);
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80 || (first & 0xff00) === 0xff00 ||
    lower.startsWith("2001:db8:") || lower.startsWith("::ffff:");
}

/** Resolves `host` and checks every address; returns the one to connect to. */
export async function resolvePublic(
  host: string,
  allowPrivate: boolean,
): Promise<{ address: string; family: 4 | 6 }> {
  const bare = host.replace(/^\[|\]$/g, "");
  let addresses: { address: string; family: 4 | 6 }[];
  if (isIP(bare)) addresses = [{ address: bare, family: isIP(bare) as 4 | 6 }];
  else {
    const [v4, v6] = await Promise.all([
      Deno.resolveDns(bare, "A").catch(() => [] as string[]),
      Deno.resolveDns(bare, "AAAA").catch(() => [] as string[]),
    ]);
    addresses = [
      ...v4.map((address) => ({ address, family: 4 as const })),
      ...v6.map((address) => ({ address, family: 6 as const })),
    ];
    if (addresses.length === 0) throw new FetchRefused(`host ${bare} does not resolve`);
  }
  if (!allowPrivate) {
    const bad = addresses.find((a) => isPrivateAddress(a.address));
    if (bad) {
      throw new FetchRefused(
        `host ${bare} resolves to ${bad.address}, a private or loopback address; ` +
          "set flatpak.catalog_allow_private_targets to fetch from internal mirrors",
      );
    }
  }
  return addresses[0];
}

async function once(url: URL, limits: FetchLimits, deadline: number): Promise<
  { status: number; location?: string; body: Uint8Array }
> {
  const pinned = await resolvePublic(url.hostname, limits.allowPrivate);
  const client = url.protocol === "https:" ? https : http;
  return await new Promise((resolve, reject) => {
    const remaining = Math.max(1, deadline - Date.now());
    const req = client.request(url, {
      method: "GET",
      headers: { "user-agent": "svc-server flatpak-catalogue", accept: "*/*" },
      // deno-lint-ignore no-explicit-any
      lookup: (_host: string, options: any, callback: any) =>
        options?.all
          ? callback(null, [{ address: pinned.address, family: pinned.family }])
          : callback(null, pinned.address, pinned.family),
    }, (res) => {
      const chunks: Uint8Array[] = [];
      let size = 0;
      res.on("data", (chunk: Uint8Array) => {
        size += chunk.length;
        if (size > limits.maxBytes) {
          req.destroy();
          reject(
            new FetchRefused(
              `${url.href} is larger than ${limits.maxBytes} bytes (flatpak.catalog_max_bytes)`,
            ),
          );
          return;
        }
        chunks.push(chunk);
      });
      res.on("end", () => {
        const body = new Uint8Array(size);
        let at = 0;
        for (const c of chunks) {
          body.set(c, at);
          at += c.length;
        }
        resolve({ status: res.statusCode ?? 0, location: res.headers.location, body });
      });
      res.on("error", reject);
    });
    req.setTimeout(remaining, () => {
      req.destroy();
      reject(new FetchRefused(`${url.href} did not answer within ${limits.timeoutMs} ms`));
    });
    req.on(
      "error",
      (err: Error) =>
        reject(err instanceof FetchRefused ? err : new FetchRefused(`${url.href}: ${err.message}`)),
    );
    req.end();
  });
}

/**
 * GETs `target` within the limits; resolves the body of a 2xx answer, undefined for 404, and throws
 * {@linkcode FetchRefused} for anything else.
 */
export async function safeFetch(target: string, limits: FetchLimits): Promise<Uint8Array | undefined> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new FetchRefused(`"${target}" is not a URL`);
  }
  const deadline = Date.now() + limits.timeoutMs;
  for (let hop = 0; hop <= 3; hop++) {
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      throw new FetchRefused(`${url.href}: only http and https URLs are fetched`);
    }
    if (url.username || url.password) {
      throw new FetchRefused(`${url.origin}: URLs with credentials are refused`);
    }
    const answer = await once(url, limits, deadline);
    if (answer.status >= 300 && answer.status < 400 && answer.location) {
      url = new URL(answer.location, url);
      continue;
    }
    if (answer.status === 404) return undefined;
    if (answer.status < 200 || answer.status > 299) {
      throw new FetchRefused(`${url.href} answered HTTP ${answer.status}`);
    }
    return answer.body;
  }
  throw new FetchRefused(`${target}: more than three redirects`);
}
