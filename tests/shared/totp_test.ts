/** TOTP against the published test vectors of RFC 4226 (HOTP) and RFC 6238 (TOTP, SHA-1). */
import assert from "node:assert/strict";
import {
  base32Decode,
  base32Encode,
  hotp,
  matchTotpStep,
  otpauthUri,
  totp,
  totpStep,
} from "../../server/auth/totp.ts";

const RFC_SECRET = new TextEncoder().encode("12345678901234567890");

Deno.test("HOTP matches RFC 4226 appendix D", async () => {
  const expected = [
    "755224",
    "287082",
    "359152",
    "969429",
    "338314",
    "254676",
    "287922",
    "162583",
    "399871",
    "520489",
  ];
  for (let counter = 0; counter < expected.length; counter++) {
    assert.equal(await hotp(RFC_SECRET, counter), expected[counter], `counter ${counter}`);
  }
});

Deno.test("TOTP (SHA-1, 8 digits) matches RFC 6238 appendix B, including the 64-bit counter", async () => {
  const vectors: [number, string][] = [
    [59, "94287082"],
    [1111111109, "07081804"],
    [1111111111, "14050471"],
    [1234567890, "89005924"],
    [2000000000, "69279037"],
    [20000000000, "65353130"],
  ];
  for (const [seconds, code] of vectors) {
    assert.equal(await totp(RFC_SECRET, seconds * 1000, 8), code, `T = ${seconds}`);
  }
});

Deno.test("base32 round-trips and matches RFC 4648", () => {
  assert.equal(base32Encode(RFC_SECRET), "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
  assert.deepEqual(base32Decode("gezd gnbv gy3t qojq gezd gnbv gy3t qojq"), RFC_SECRET);
  assert.equal(base32Encode(new TextEncoder().encode("foobar")), "MZXW6YTBOI");
  assert.throws(() => base32Decode("ABC1"), /not a base32 character/);
});

Deno.test("a code matches its own step and one either side, nothing further, nothing malformed", async () => {
  const at = 1_700_000_000_000;
  const now = totpStep(at);
  for (const delta of [-1, 0, 1]) {
    const code = await hotp(RFC_SECRET, now + delta);
    assert.equal(await matchTotpStep(RFC_SECRET, code, at), now + delta);
  }
  for (const delta of [-3, -2, 2, 3]) {
    const code = await hotp(RFC_SECRET, now + delta);
    const hit = await matchTotpStep(RFC_SECRET, code, at);
    // A 6-digit code of a far step can collide with a near one by chance; it must then be that near step.
    if (hit !== undefined) assert.ok(Math.abs(hit - now) <= 1);
  }
  for (const bad of ["", "12345", "1234567", "12345a", " 123456"]) {
    assert.equal(await matchTotpStep(RFC_SECRET, bad, at), undefined, JSON.stringify(bad));
  }
});

Deno.test("otpauth URI names issuer, account and parameters", () => {
  const uri = new URL(otpauthUri(RFC_SECRET, "alice@example"));
  assert.equal(uri.protocol, "otpauth:");
  assert.ok(uri.href.startsWith("otpauth://totp/svc:alice%40example?"), uri.href);
  assert.equal(uri.searchParams.get("secret"), "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
  assert.equal(uri.searchParams.get("issuer"), "svc");
  assert.equal(uri.searchParams.get("digits"), "6");
  assert.equal(uri.searchParams.get("period"), "30");
});
