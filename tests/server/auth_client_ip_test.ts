/** Client address resolution behind (and not behind) trusted proxies. */
import assert from "node:assert/strict";
import { createClientIpResolver, parseIp, REMOTE_ADDR_HEADER } from "../../server/core/client_ip.ts";

const headers = (remote: string, xff?: string) =>
  new Headers({ [REMOTE_ADDR_HEADER]: remote, ...(xff === undefined ? {} : { "x-forwarded-for": xff }) });

Deno.test("without trusted proxies X-Forwarded-For is ignored", () => {
  const resolve = createClientIpResolver([]);
  assert.equal(resolve(headers("203.0.113.1", "1.1.1.1")), "203.0.113.1");
  assert.equal(resolve(new Headers({ "x-forwarded-for": "1.1.1.1" })), "", "no connection address, no guess");
});

Deno.test("trusted proxies: rightmost untrusted hop wins; IPv4, IPv6, CIDR, mapped and bracketed forms", () => {
  const resolve = createClientIpResolver(["10.0.0.0/8", "192.168.1.5", "fd00::/8"]);
  assert.equal(resolve(headers("10.2.3.4", "198.51.100.1")), "198.51.100.1");
  assert.equal(resolve(headers("10.2.3.4", "6.6.6.6, 198.51.100.1, 10.9.9.9")), "198.51.100.1");
  assert.equal(resolve(headers("192.168.1.5", "198.51.100.2")), "198.51.100.2");
  assert.equal(resolve(headers("192.168.1.6", "198.51.100.2")), "192.168.1.6", "a /32 entry is exact");
  assert.equal(resolve(headers("::ffff:10.1.1.1", "2001:db8::7")), "2001:db8::7");
  assert.equal(resolve(headers("fd12::1", "[2001:db8::8]")), "2001:db8::8");
  assert.equal(resolve(headers("10.1.1.1", "198.51.100.3:51234")), "198.51.100.3");
  assert.equal(
    resolve(headers("10.1.1.1", "10.1.1.2, 10.1.1.3")),
    "10.1.1.2",
    "all hops trusted: the first one",
  );
  assert.equal(
    resolve(headers("10.1.1.1", "not-an-ip")),
    "10.1.1.1",
    "garbage falls back to the proxy address",
  );
  assert.equal(resolve(headers("10.1.1.1")), "10.1.1.1");
  assert.equal(resolve(headers("11.0.0.1", "198.51.100.4")), "11.0.0.1", "outside the range");
});

Deno.test("a malformed trusted proxy entry is refused with the key name", () => {
  for (const bad of ["10.0.0.0/33", "300.1.1.1", "example.org", "::1/129", "10.0.0.0/8/1"]) {
    assert.throws(() => createClientIpResolver([bad]), /server\.trusted_proxies/, bad);
  }
});

Deno.test("parseIp agrees on equivalent spellings", () => {
  assert.equal(parseIp("2001:db8::1")!.value, parseIp("2001:0db8:0000:0000:0000:0000:0000:0001")!.value);
  assert.equal(parseIp("::ffff:1.2.3.4")!.value, parseIp("::ffff:102:304")!.value);
  assert.equal(parseIp("1.2.3.256"), undefined);
  assert.equal(parseIp("1::2::3"), undefined);
  assert.equal(parseIp("1:2:3:4:5:6:7:8:9"), undefined);
});
