/**
 * The client's address for audit rows and login rate limits. `X-Forwarded-For` is believed only when the
 * connection comes from a configured trusted proxy (`server.trusted_proxies`: addresses or CIDR ranges);
 * otherwise anyone could pick the address their actions are logged under.
 *
 * The connection's own address reaches the Hono app in the request header {@link REMOTE_ADDR_HEADER}: the
 * web-port bridge sets it from the socket and drops any copy a client sent.
 */

/** Header carrying the TCP peer address, set by the web-port bridge (never by clients). */
export const REMOTE_ADDR_HEADER = "x-svc-remote-addr";

/** Resolves the client address from request headers. */
export type ClientIpResolver = (headers: Headers) => string;

/** Builds a resolver for a trusted-proxy list; throws naming a malformed entry. */
export function createClientIpResolver(trustedProxies: readonly string[]): ClientIpResolver {
  const ranges = trustedProxies.map(parseRange);
  const trusted = (ip: string) => {
    const addr = parseIp(ip);
    return addr !== undefined && ranges.some((r) => r.v6 === addr.v6 && inRange(addr.value, r));
  };
  return (headers) => {
    const remote = normalize(headers.get(REMOTE_ADDR_HEADER) ?? "");
    if (remote === "" || !trusted(remote)) return remote;
    // Walk the chain from the nearest hop outwards; the first address that is not a trusted proxy is the client.
    const hops = (headers.get("x-forwarded-for") ?? "").split(",").map((h) => normalize(h)).filter((h) =>
      h !== ""
    );
    for (let i = hops.length - 1; i >= 0; i--) {
      if (parseIp(hops[i]) === undefined) return remote;
      if (!trusted(hops[i])) return hops[i];
    }
    return hops[0] ?? remote;
  };
}

interface Range {
  v6: boolean;
  value: bigint;
  mask: bigint;
}

function inRange(value: bigint, range: Range): boolean {
  return (value & range.mask) === (range.value & range.mask);
}

function parseRange(entry: string): Range {
  const [addrPart, bitsPart, ...rest] = entry.trim().split("/");
  const addr = parseIp(normalize(addrPart ?? ""));
  const width = addr?.v6 ? 128 : 32;
  const bits = bitsPart === undefined ? width : /^\d{1,3}$/.test(bitsPart) ? Number(bitsPart) : NaN;
  if (!addr || rest.length > 0 || !(bits >= 0 && bits <= width)) {
    throw new Error(
      `server.trusted_proxies: "${entry}" is not an IP address or CIDR range (for example 10.0.0.1 or 10.0.0.0/8)`,
    );
  }
  const all = (1n << BigInt(width)) - 1n;
  const mask = bits === 0 ? 0n : (all << BigInt(width - bits)) & all;
  return { v6: addr.v6, value: addr.value, mask };
}

/** Strips brackets, ports and the IPv4-mapped IPv6 prefix, so one host has one spelling. */
function normalize(raw: string): string {
  let s = raw.trim();
  if (s.startsWith("[")) s = s.slice(1, s.indexOf("]") > 0 ? s.indexOf("]") : undefined);
  else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(s)) s = s.slice(0, s.lastIndexOf(":"));
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(s);
  return (mapped ? mapped[1] : s).toLowerCase();
}

/** Parses an IPv4 or IPv6 address into an integer; undefined when it is neither. */
export function parseIp(s: string): { v6: boolean; value: bigint } | undefined {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (v4) {
    const parts = v4.slice(1).map(Number);
    if (parts.some((p) => p > 255)) return undefined;
    return { v6: false, value: parts.reduce((acc, p) => (acc << 8n) | BigInt(p), 0n) };
  }
  if (!/^[0-9a-f:.]+$/i.test(s) || !s.includes(":")) return undefined;
  let text = s;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const v4tail = parseIp(tail[1]);
    if (!v4tail) return undefined;
    const n = Number(v4tail.value);
    text = text.slice(0, -tail[1].length) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const head = halves[0] === "" ? [] : halves[0].split(":");
  const rest = halves.length === 2 ? (halves[1] === "" ? [] : halves[1].split(":")) : [];
  const missing = 8 - head.length - rest.length;
  if ((halves.length === 1 && missing !== 0) || (halves.length === 2 && missing < 1)) return undefined;
  const groups = [...head, ...Array(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  let value = 0n;
  for (const g of groups) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return undefined;
    value = (value << 16n) | BigInt(parseInt(g, 16));
  }
  return { v6: true, value };
}
