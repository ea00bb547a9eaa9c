/**
 * WebAuthn checks against real attestation and assertion objects made by a software authenticator written
 * here (WebCrypto ECDSA P-256, `none` attestation, CBOR authenticator data): registration, the second
 * factor and passkey-first login succeed; a wrong origin, a wrong RP ID, a replayed challenge, a counter
 * that goes back and another user's key are refused.
 */
import assert from "node:assert/strict";
import type { Db } from "../../server/db/db.ts";
import { dbTest } from "../helpers/db.ts";
import {
  finishRegistration,
  listCredentials,
  relyingPartyOf,
  removeCredential,
  startAuthentication,
  startRegistration,
  usePasskeyLogin,
  verifyAssertion,
  WebAuthnError,
} from "../../server/auth/webauthn.ts";
import type { ServerConfig } from "../../server/config/config.ts";

// ---- a small CBOR encoder (major types 0, 1, 2, 3, 5; enough for COSE keys and attestation objects) ----

type Cbor = number | string | Uint8Array | Map<number | string, Cbor>;

function head(major: number, n: number): number[] {
  if (n < 24) return [(major << 5) | n];
  if (n < 0x100) return [(major << 5) | 24, n];
  if (n < 0x10000) return [(major << 5) | 25, n >> 8, n & 0xff];
  return [(major << 5) | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
}

function cbor(value: Cbor): Uint8Array {
  const out: number[] = [];
  const put = (v: Cbor) => {
    if (typeof v === "number") out.push(...(v >= 0 ? head(0, v) : head(1, -1 - v)));
    else if (typeof v === "string") {
      const b = new TextEncoder().encode(v);
      out.push(...head(3, b.length), ...b);
    } else if (v instanceof Uint8Array) out.push(...head(2, v.length), ...v);
    else {
      out.push(...head(5, v.size));
      for (const [k, x] of v) {
        put(k);
        put(x);
      }
    }
  };
  put(value);
  return new Uint8Array(out);
}

// ---- helpers ----

type Bytes = Uint8Array<ArrayBuffer>;

const b64url = (bytes: Uint8Array): string => {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
};
const sha256 = async (bytes: Bytes | string): Promise<Bytes> =>
  new Uint8Array(
    await crypto.subtle.digest(
      "SHA-256",
      typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes,
    ),
  );
const concat = (...parts: Uint8Array[]): Bytes => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
const u32 = (n: number) => new Uint8Array([(n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);

/** WebCrypto's raw r||s as the DER SEQUENCE WebAuthn wants. */
function derSignature(raw: Uint8Array): Bytes {
  const int = (b: Uint8Array): Bytes => {
    let i = 0;
    while (i < b.length - 1 && b[i] === 0) i++;
    let v: Bytes = new Uint8Array(b.slice(i));
    if (v[0] & 0x80) v = concat(new Uint8Array([0]), v);
    return concat(new Uint8Array([0x02, v.length]), v);
  };
  const body = concat(int(raw.slice(0, 32)), int(raw.slice(32)));
  return concat(new Uint8Array([0x30, body.length]), body);
}

const FLAG_UP = 0x01, FLAG_UV = 0x04, FLAG_AT = 0x40;

/** A software authenticator with one P-256 credential. */
class SoftAuthenticator {
  counter = 0;
  readonly credentialId = crypto.getRandomValues(new Uint8Array(16));
  userHandle = "";
  private keys?: CryptoKeyPair;

  async create(
    options: Record<string, unknown>,
    ctx: { origin: string; rpId?: string },
  ): Promise<Record<string, unknown>> {
    this.keys = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign"]);
    const jwk = await crypto.subtle.exportKey("jwk", this.keys.publicKey);
    const coords = (s: string) =>
      Uint8Array.from(atob(s.replaceAll("-", "+").replaceAll("_", "/")), (c) => c.charCodeAt(0));
    const cose = cbor(
      new Map<number, Cbor>([[1, 2], [3, -7], [-1, 1], [-2, coords(jwk.x!)], [-3, coords(jwk.y!)]]),
    );
    const rp = options.rp as { id: string };
    this.userHandle = (options.user as { id: string }).id;
    const authData = concat(
      await sha256(ctx.rpId ?? rp.id),
      new Uint8Array([FLAG_UP | FLAG_UV | FLAG_AT]),
      u32(this.counter),
      new Uint8Array(16),
      new Uint8Array([0, this.credentialId.length]),
      this.credentialId,
      cose,
    );
    const clientData = JSON.stringify({
      type: "webauthn.create",
      challenge: options.challenge,
      origin: ctx.origin,
    });
    const attestationObject = cbor(
      new Map<string, Cbor>([["fmt", "none"], ["attStmt", new Map()], ["authData", authData]]),
    );
    return {
      id: b64url(this.credentialId),
      rawId: b64url(this.credentialId),
      type: "public-key",
      response: {
        clientDataJSON: b64url(new TextEncoder().encode(clientData)),
        attestationObject: b64url(attestationObject),
        transports: ["internal"],
      },
      clientExtensionResults: {},
    };
  }

  async get(
    options: Record<string, unknown>,
    ctx: { origin: string; rpId?: string; counter?: number },
  ): Promise<Record<string, unknown>> {
    if (ctx.counter === undefined) this.counter++;
    const authData = concat(
      await sha256(ctx.rpId ?? (options.rpId as string)),
      new Uint8Array([FLAG_UP | FLAG_UV]),
      u32(ctx.counter ?? this.counter),
    );
    const clientData = new TextEncoder().encode(
      JSON.stringify({ type: "webauthn.get", challenge: options.challenge, origin: ctx.origin }),
    );
    const raw = new Uint8Array(
      await crypto.subtle.sign(
        { name: "ECDSA", hash: "SHA-256" },
        this.keys!.privateKey,
        concat(authData, await sha256(clientData)),
      ),
    );
    return {
      id: b64url(this.credentialId),
      rawId: b64url(this.credentialId),
      type: "public-key",
      response: {
        clientDataJSON: b64url(clientData),
        authenticatorData: b64url(authData),
        signature: b64url(derSignature(raw)),
        userHandle: this.userHandle,
      },
      clientExtensionResults: {},
    };
  }
}

const CONFIG = { server: { hostnames: ["svc.example.test"], enrollmentPort: 8443 } } as ServerConfig;
const RP = relyingPartyOf(CONFIG);
const ORIGIN = "https://svc.example.test:8443";

async function newUser(db: Db, username: string): Promise<{ id: string; username: string }> {
  const [row] = await db.query<{ id: string }>("INSERT INTO users (username) VALUES ($1) RETURNING id", [
    username,
  ]);
  return { id: row.id, username };
}

async function refused(p: Promise<unknown>, reason: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof WebAuthnError, `a WebAuthnError, got ${err}`);
    assert.equal(err.reason, reason, err.message);
    return true;
  });
}

async function register(db: Db, user: { id: string; username: string }, name = "Laptop") {
  const key = new SoftAuthenticator();
  const start = await startRegistration(db, RP, user);
  const response = await key.create(start.options, { origin: ORIGIN });
  // deno-lint-ignore no-explicit-any
  await finishRegistration(db, RP, user.id, { token: start.token, name, response: response as any });
  return key;
}

// deno-lint-ignore no-explicit-any
type Any = any;

Deno.test("the relying party is the web port of the configured hostnames (default localhost)", () => {
  assert.deepEqual(RP.rpIds, ["svc.example.test"]);
  assert.deepEqual(RP.origins, [ORIGIN]);
  const local = relyingPartyOf({ server: { hostnames: [], enrollmentPort: 443 } } as unknown as ServerConfig);
  assert.deepEqual(local, { rpIds: ["localhost"], origins: ["https://localhost"], name: "svc" });
});

dbTest(
  "a registered key is listed, passes as a second factor and as a passkey, and can be removed",
  async (db) => {
    const alice = await newUser(db, "alice");
    const key = await register(db, alice);
    const listed = await listCredentials(db, alice.id);
    assert.equal(listed.length, 1);
    assert.equal(listed[0].name, "Laptop");
    assert.equal(listed[0].lastUsedAt, null);

    // Second factor: the challenge is bound to alice.
    const second = await startAuthentication(db, RP, { userId: alice.id });
    assert.equal((second.options.allowCredentials as unknown[]).length, 1);
    const ok = await verifyAssertion(db, RP, {
      challenge: second.options.challenge as string,
      userId: alice.id,
      response: (await key.get(second.options, { origin: ORIGIN })) as Any,
    });
    assert.equal(ok.userId, alice.id);

    // Passkey-first: no user named, the credential says who.
    const first = await startAuthentication(db, RP, {});
    assert.deepEqual(first.options.allowCredentials ?? [], []);
    const who = await usePasskeyLogin(
      db,
      RP,
      first.token!,
      (await key.get(first.options, { origin: ORIGIN })) as Any,
    );
    assert.equal(who.userId, alice.id);
    assert.ok((await listCredentials(db, alice.id))[0].lastUsedAt, "last use recorded");

    // A second, named key; a duplicate name is refused.
    await register(db, alice, "Phone");
    await assert.rejects(register(db, alice, "Phone"), /another of your keys has this name/);
    assert.deepEqual((await listCredentials(db, alice.id)).map((c) => c.name), ["Laptop", "Phone"]);

    const bob = await newUser(db, "bob");
    assert.equal(await removeCredential(db, bob.id, listed[0].id), false, "not bob's to remove");
    assert.equal(await removeCredential(db, alice.id, listed[0].id), true);
    assert.deepEqual((await listCredentials(db, alice.id)).map((c) => c.name), ["Phone"]);
  },
);

dbTest("a wrong origin or RP ID is refused at registration and at sign-in", async (db) => {
  const alice = await newUser(db, "alice");
  for (
    const ctx of [{ origin: "https://evil.example.test:8443" }, { origin: "http://svc.example.test:8443" }, {
      origin: ORIGIN,
      rpId: "evil.example.test",
    }]
  ) {
    const start = await startRegistration(db, RP, alice);
    const response = await new SoftAuthenticator().create(start.options, ctx);
    await refused(
      finishRegistration(db, RP, alice.id, { token: start.token, name: "X", response: response as Any }),
      "invalid_attestation",
    );
  }
  assert.equal((await listCredentials(db, alice.id)).length, 0, "nothing stored");

  const key = await register(db, alice);
  for (
    const ctx of [{ origin: "https://evil.example.test:8443" }, { origin: ORIGIN, rpId: "evil.example.test" }]
  ) {
    const start = await startAuthentication(db, RP, {});
    await refused(
      usePasskeyLogin(db, RP, start.token!, (await key.get(start.options, ctx)) as Any),
      "invalid_assertion",
    );
  }
});

dbTest("challenges work once: a replayed registration or sign-in is refused", async (db) => {
  const alice = await newUser(db, "alice");
  const key = new SoftAuthenticator();
  const start = await startRegistration(db, RP, alice);
  const response = (await key.create(start.options, { origin: ORIGIN })) as Any;
  await finishRegistration(db, RP, alice.id, { token: start.token, name: "Laptop", response });
  await refused(
    finishRegistration(db, RP, alice.id, { token: start.token, name: "Again", response }),
    "expired_or_used",
  );

  const login = await startAuthentication(db, RP, {});
  const assertion = (await key.get(login.options, { origin: ORIGIN })) as Any;
  await usePasskeyLogin(db, RP, login.token!, assertion);
  await refused(usePasskeyLogin(db, RP, login.token!, assertion), "expired_or_used");

  // The same assertion against a fresh challenge: its signed challenge is the old one.
  const fresh = await startAuthentication(db, RP, {});
  await refused(usePasskeyLogin(db, RP, fresh.token!, assertion), "invalid_assertion");

  // Another user's registration token is not alice's.
  const bob = await newUser(db, "bob");
  const bobStart = await startRegistration(db, RP, bob);
  const forged = (await new SoftAuthenticator().create(bobStart.options, { origin: ORIGIN })) as Any;
  await refused(
    finishRegistration(db, RP, alice.id, { token: bobStart.token, name: "Bob's", response: forged }),
    "expired_or_used",
  );
});

dbTest("a signature counter that does not advance is refused (a cloned key)", async (db) => {
  const alice = await newUser(db, "alice");
  const key = await register(db, alice);
  for (let i = 0; i < 3; i++) {
    const s = await startAuthentication(db, RP, { userId: alice.id });
    await verifyAssertion(db, RP, {
      challenge: s.options.challenge as string,
      userId: alice.id,
      response: (await key.get(s.options, { origin: ORIGIN })) as Any,
    });
  }
  for (const counter of [3, 2]) {
    const s = await startAuthentication(db, RP, { userId: alice.id });
    await refused(
      verifyAssertion(db, RP, {
        challenge: s.options.challenge as string,
        userId: alice.id,
        response: (await key.get(s.options, { origin: ORIGIN, counter })) as Any,
      }),
      "counter_regression",
    );
  }
  const [row] = await db.query<{ sign_count: string | number }>(
    "SELECT sign_count FROM webauthn_credentials",
  );
  assert.equal(Number(row.sign_count), 3);
});

dbTest("as a second factor, only the user's own keys count", async (db) => {
  const alice = await newUser(db, "alice");
  const bob = await newUser(db, "bob");
  const bobKey = await register(db, bob);
  const s = await startAuthentication(db, RP, { userId: alice.id });
  await refused(
    verifyAssertion(db, RP, {
      challenge: s.options.challenge as string,
      userId: alice.id,
      response: (await bobKey.get(s.options, { origin: ORIGIN })) as Any,
    }),
    "unknown_credential",
  );
});

dbTest(
  "through the app: register with step-up, log in with the key (second factor and passkey), step-up with it, remove it",
  async (db) => {
    const { createTestServer } = await import("../helpers/app.ts");
    const server = await createTestServer({
      db,
      config: { server: { hostnames: ["svc.example.test"], enrollmentPort: 8443 } },
    });
    try {
      const alice = await server.loginAs({ username: "alice" });
      const key = new SoftAuthenticator();

      // Registration needs step-up.
      const bare = await alice.request("POST", "/api/v1/auth/webauthn/register/options", {});
      assert.equal(bare.status, 403);
      assert.equal(bare.json.error.code, "reauthentication_required");
      const opts = await alice.request("POST", "/api/v1/auth/webauthn/register/options", {
        password: alice.password,
      });
      assert.equal(opts.status, 200, opts.text);
      assert.equal(opts.json.options.rp.id, "svc.example.test");
      const created = await alice.request("POST", "/api/v1/auth/webauthn/register", {
        token: opts.json.token,
        name: "Laptop",
        response: await key.create(opts.json.options, { origin: ORIGIN }),
      });
      assert.equal(created.status, 201, created.text);
      const list = await alice.request("GET", "/api/v1/auth/webauthn/credentials");
      assert.deepEqual(list.json.items.map((c: { name: string }) => c.name), ["Laptop"]);
      assert.equal((await alice.request("GET", "/api/v1/auth/me")).json.second_factor.webauthn, 1);

      // Password, then the key.
      const anon = server.anonymous({ ip: "10.9.0.1" });
      const first = await anon.request("POST", "/api/v1/auth/login", {
        username: "alice",
        password: alice.password,
      });
      assert.deepEqual(first.json.second_factor_required.methods, ["webauthn"]);
      const token = first.json.second_factor_required.token;
      // A TOTP code does nothing for a passkey-only user.
      const code = await anon.request("POST", "/api/v1/auth/login/second-factor", { token, code: "123456" });
      assert.equal(code.status, 401);
      const get = await anon.request("POST", "/api/v1/auth/login/webauthn/options", { token });
      assert.equal(get.status, 200, get.text);
      const wrongOrigin = await anon.request("POST", "/api/v1/auth/login/webauthn", {
        token,
        response: await key.get(get.json.options, { origin: "https://evil.example.test:8443" }),
      });
      assert.equal(wrongOrigin.status, 401);
      assert.equal(wrongOrigin.json.error.code, "invalid_assertion");
      const assertion = await key.get(get.json.options, { origin: ORIGIN });
      const second = await anon.request("POST", "/api/v1/auth/login/webauthn", {
        token,
        response: assertion,
      });
      assert.equal(second.status, 200, second.text);
      assert.equal(second.json.user.username, "alice");
      const replay = await anon.request("POST", "/api/v1/auth/login/webauthn", {
        token,
        response: assertion,
      });
      assert.equal(replay.status, 401, "the first step is used up");

      // Passkey first: no username at all.
      const anon2 = server.anonymous({ ip: "10.9.0.2" });
      const pk = await anon2.request("POST", "/api/v1/auth/login/webauthn/options", {});
      assert.equal(pk.status, 200, pk.text);
      const pkAssertion = await key.get(pk.json.options, { origin: ORIGIN });
      const pkLogin = await anon2.request("POST", "/api/v1/auth/login/webauthn", {
        token: pk.json.token,
        response: pkAssertion,
      });
      assert.equal(pkLogin.status, 200, pkLogin.text);
      assert.equal(pkLogin.json.user.username, "alice");
      const pkReplay = await anon2.request("POST", "/api/v1/auth/login/webauthn", {
        token: pk.json.token,
        response: pkAssertion,
      });
      assert.equal(pkReplay.status, 401);

      // Step-up for a passkey-only user: password plus the key.
      const list2 = await alice.request("GET", "/api/v1/auth/webauthn/credentials");
      const id = list2.json.items[0].id;
      assert.ok(list2.json.items[0].last_used_at, "last use shown");
      const noKey = await alice.request("DELETE", `/api/v1/auth/webauthn/credentials/${id}`, {
        password: alice.password,
      });
      assert.equal(noKey.status, 403);
      assert.equal(noKey.json.error.code, "second_factor_required");
      const su = await alice.request("POST", "/api/v1/auth/step-up/webauthn/options", {});
      assert.equal(su.status, 200, su.text);
      const removed = await alice.request("DELETE", `/api/v1/auth/webauthn/credentials/${id}`, {
        password: alice.password,
        webauthn: { token: su.json.token, response: await key.get(su.json.options, { origin: ORIGIN }) },
      });
      assert.equal(removed.status, 204, removed.text);
      assert.equal((await alice.request("GET", "/api/v1/auth/webauthn/credentials")).json.items.length, 0);

      // Every attempt is audited with its outcome.
      const rows = await db.query<{ action: string; outcome: string; details: Record<string, unknown> }>(
        `SELECT action, outcome, details FROM audit_logs
        WHERE action IN ('auth.login_webauthn', 'auth.login') ORDER BY created_at`,
      );
      const webauthnFailures = rows.filter((r) => r.action === "auth.login_webauthn");
      assert.ok(webauthnFailures.some((r) => r.details.reason === "invalid_assertion"), JSON.stringify(rows));
      assert.ok(webauthnFailures.some((r) => r.details.reason === "expired_or_used"), JSON.stringify(rows));
      const methods = rows.filter((r) => r.action === "auth.login" && r.outcome === "success")
        .map((r) => r.details?.second_factor);
      assert.ok(methods.includes("webauthn") && methods.includes("passkey"), JSON.stringify(methods));
    } finally {
      await server.close();
    }
  },
);

dbTest("the MFA policy counts a passkey as a factor", async (db) => {
  const { mustEnrol, setMfaPolicy } = await import("../../server/auth/mfa_policy.ts");
  const alice = await newUser(db, "alice");
  await setMfaPolicy(db, { mode: "all", permissions: [], include_ldap: false }, alice.id);
  const who = { id: alice.id, source: "local", permissions: new Set<string>() as ReadonlySet<string> };
  assert.equal(await mustEnrol(db, who), true, "no factor yet: must enrol");
  await register(db, alice);
  assert.equal(await mustEnrol(db, who), false, "a passkey is a factor");
});
