/**
 * A CA private key on a PKCS#11 token (an HSM, SoftHSM2, a smart card), used through the runtime's FFI
 * against the module's `C_*` functions: the key never leaves the token, which signs every agent and server
 * certificate. Only what signing needs is bound (initialize, find the token and the key, log in, ECDSA
 * sign); the digest is computed here and the token signs it with `CKM_ECDSA`, whose raw r‖s output is the
 * WebCrypto format `@peculiar/x509` expects.
 *
 * Configured as `ca.key_file` holding a PKCS#11 URI (RFC 7512), with `ca.cert_file` the CA certificate:
 * `pkcs11:token=<token label>;object=<key label>?module-path=<.so>&pin-source=file:<path>`. Elliptic-curve
 * keys (P-256, P-384) only.
 *
 * @module
 */
import { KeyObject, sign } from "node:crypto";
import { x509 } from "../../shared/pki/csr.ts";

const CKR_OK = 0n;
const CKR_CRYPTOKI_ALREADY_INITIALIZED = 0x191n;
const CKR_USER_ALREADY_LOGGED_IN = 0x100n;
const CKF_SERIAL_SESSION = 4n;
const CKU_USER = 1n;
const CKA_CLASS = 0x0n;
const CKA_LABEL = 0x3n;
const CKO_PRIVATE_KEY = 3n;
const CKM_ECDSA = 0x1041n;
/** Size of CK_TOKEN_INFO on LP64 is about 208 bytes; the label is its first 32 bytes. */
const TOKEN_INFO_BYTES = 512;

/** A parsed `pkcs11:` URI. */
export interface Pkcs11Uri {
  modulePath: string;
  tokenLabel: string;
  keyLabel: string;
  pinFile: string;
}

/** Whether `ca.key_file` names a key on a token. */
export function isPkcs11Uri(value: string): boolean {
  return value.startsWith("pkcs11:");
}

/**
 * Parses `pkcs11:token=…;object=…?module-path=…&pin-source=file:…`.
 *
 * @throws {Error} naming the missing or unsupported part
 */
export function parsePkcs11Uri(uri: string): Pkcs11Uri {
  const where = `ca.key_file ${uri.replace(/pin-value=[^&]*/, "pin-value=…")}`;
  const [pathPart, queryPart = ""] = uri.slice("pkcs11:".length).split("?", 2);
  const attrs = new Map<string, string>();
  for (const piece of pathPart.split(";").filter((p) => p !== "")) {
    const eq = piece.indexOf("=");
    if (eq < 0) throw new Error(`${where}: "${piece}" is not name=value`);
    attrs.set(piece.slice(0, eq), decodeURIComponent(piece.slice(eq + 1)));
  }
  const query = new Map<string, string>();
  for (const piece of queryPart.split("&").filter((p) => p !== "")) {
    const eq = piece.indexOf("=");
    if (eq < 0) throw new Error(`${where}: "${piece}" is not name=value`);
    query.set(piece.slice(0, eq), decodeURIComponent(piece.slice(eq + 1)));
  }
  if (query.has("pin-value")) {
    throw new Error(
      `${where}: pin-value puts the PIN in the configuration; use pin-source=file:/path instead`,
    );
  }
  const need = (value: string | undefined, what: string) => {
    if (!value) throw new Error(`${where}: ${what} is missing`);
    return value;
  };
  const pinSource = need(query.get("pin-source"), "pin-source=file:/path (the PIN file)");
  if (!pinSource.startsWith("file:")) throw new Error(`${where}: pin-source must be file:/path`);
  return {
    modulePath: need(query.get("module-path"), "module-path=/path/to/module.so"),
    tokenLabel: need(attrs.get("token"), "token=<token label>"),
    keyLabel: need(attrs.get("object"), "object=<key label>"),
    pinFile: pinSource.slice("file:".length),
  };
}

const SYMBOLS = {
  C_Initialize: { parameters: ["pointer"], result: "u64" },
  C_GetSlotList: { parameters: ["u8", "buffer", "buffer"], result: "u64" },
  C_GetTokenInfo: { parameters: ["u64", "buffer"], result: "u64" },
  C_OpenSession: { parameters: ["u64", "u64", "pointer", "pointer", "buffer"], result: "u64" },
  C_Login: { parameters: ["u64", "u64", "buffer", "u64"], result: "u64" },
  C_FindObjectsInit: { parameters: ["u64", "buffer", "u64"], result: "u64" },
  C_FindObjects: { parameters: ["u64", "buffer", "u64", "buffer"], result: "u64" },
  C_FindObjectsFinal: { parameters: ["u64"], result: "u64" },
  C_SignInit: { parameters: ["u64", "buffer", "u64"], result: "u64" },
  C_Sign: { parameters: ["u64", "buffer", "u64", "buffer", "buffer"], result: "u64" },
} as const;

type Lib = Deno.DynamicLibrary<typeof SYMBOLS>;

function check(rv: number | bigint, call: string, uri: Pkcs11Uri, ok: bigint[] = []): void {
  const code = BigInt(rv);
  if (code === CKR_OK || ok.includes(code)) return;
  throw new Error(`PKCS#11 ${call} failed with CKR 0x${code.toString(16)} (module ${uri.modulePath})`);
}

/** A CK_ATTRIBUTE array; the value buffers are kept alive by the returned object. */
function template(attrs: Array<[bigint, Uint8Array]>): { bytes: Uint8Array; keep: Uint8Array[] } {
  const bytes = new Uint8Array(24 * attrs.length);
  const view = new DataView(bytes.buffer);
  attrs.forEach(([type, value], i) => {
    view.setBigUint64(i * 24, type, true);
    view.setBigUint64(
      i * 24 + 8,
      BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(value as Uint8Array<ArrayBuffer>))),
      true,
    );
    view.setBigUint64(i * 24 + 16, BigInt(value.length), true);
  });
  return { bytes, keep: attrs.map(([, v]) => v) };
}

function ulong(n: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, n, true);
  return b;
}

/** The token key as the CA's signing key. */
export interface TokenKey {
  /** A stand-in `CryptoKey` (algorithm and usages only); signing with it goes to the token. */
  key: CryptoKey;
  close(): void;
}

/**
 * Opens the module, finds the token and the private key by their labels, logs in with the PIN from the file
 * and makes `@peculiar/x509` sign with the token whenever the returned key is the signing key (every other
 * key keeps using the runtime's WebCrypto).
 *
 * @throws {Error} naming the module, token, key or PIN file that is wrong
 */
export async function openTokenKey(uri: Pkcs11Uri, namedCurve: string): Promise<TokenKey> {
  let pin: string;
  try {
    pin = (await Deno.readTextFile(uri.pinFile)).trim();
  } catch (err) {
    throw new Error(`PKCS#11 PIN file ${uri.pinFile} cannot be read: ${(err as Error).message}`);
  }
  let lib: Lib;
  try {
    lib = Deno.dlopen(uri.modulePath, SYMBOLS);
  } catch (err) {
    const hint = err instanceof Deno.errors.NotCapable
      ? " (svc-server must run with --allow-ffi to use a PKCS#11 module)"
      : "";
    throw new Error(`PKCS#11 module ${uri.modulePath} cannot be loaded: ${(err as Error).message}${hint}`);
  }
  try {
    const s = lib.symbols;
    check(s.C_Initialize(null), "C_Initialize", uri, [CKR_CRYPTOKI_ALREADY_INITIALIZED]);
    const count = new BigUint64Array(1);
    check(s.C_GetSlotList(1, new Uint8Array(0), new Uint8Array(count.buffer)), "C_GetSlotList", uri);
    const slots = new BigUint64Array(Number(count[0]));
    check(
      s.C_GetSlotList(1, new Uint8Array(slots.buffer), new Uint8Array(count.buffer)),
      "C_GetSlotList",
      uri,
    );
    let slot: bigint | undefined;
    const labels: string[] = [];
    for (const id of slots.slice(0, Number(count[0]))) {
      const info = new Uint8Array(TOKEN_INFO_BYTES);
      check(s.C_GetTokenInfo(id, info), "C_GetTokenInfo", uri);
      const label = new TextDecoder().decode(info.slice(0, 32)).trimEnd();
      labels.push(label);
      if (label === uri.tokenLabel) slot = id;
    }
    if (slot === undefined) {
      throw new Error(
        `PKCS#11 token "${uri.tokenLabel}" not found in ${uri.modulePath} (tokens: ${
          labels.map((l) => `"${l}"`).join(", ") || "none"
        })`,
      );
    }
    const session = new BigUint64Array(1);
    check(
      s.C_OpenSession(slot, CKF_SERIAL_SESSION, null, null, new Uint8Array(session.buffer)),
      "C_OpenSession",
      uri,
    );
    const h = session[0];
    const pinBytes = new TextEncoder().encode(pin);
    const login = s.C_Login(h, CKU_USER, pinBytes, BigInt(pinBytes.length));
    if (BigInt(login) === 0xa0n) {
      throw new Error(`PKCS#11 token "${uri.tokenLabel}": the PIN in ${uri.pinFile} is wrong`);
    }
    check(login, "C_Login", uri, [CKR_USER_ALREADY_LOGGED_IN]);
    const t = template([[CKA_CLASS, ulong(CKO_PRIVATE_KEY)], [
      CKA_LABEL,
      new TextEncoder().encode(uri.keyLabel),
    ]]);
    check(s.C_FindObjectsInit(h, t.bytes, 2n), "C_FindObjectsInit", uri);
    const found = new BigUint64Array(2);
    const n = new BigUint64Array(1);
    check(
      s.C_FindObjects(h, new Uint8Array(found.buffer), 2n, new Uint8Array(n.buffer)),
      "C_FindObjects",
      uri,
    );
    check(s.C_FindObjectsFinal(h), "C_FindObjectsFinal", uri);
    if (n[0] !== 1n) {
      throw new Error(
        `PKCS#11 token "${uri.tokenLabel}": ${n[0] === 0n ? "no" : "more than one"} private key labelled ` +
          `"${uri.keyLabel}"`,
      );
    }
    const handle = found[0];
    const hashFor: Record<string, string> = { "P-256": "SHA-256", "P-384": "SHA-384", "P-521": "SHA-512" };
    const key = {
      type: "private",
      extractable: false,
      algorithm: { name: "ECDSA", namedCurve },
      usages: ["sign"],
    } as unknown as CryptoKey;
    let queue: Promise<unknown> = Promise.resolve();
    const tokenSign = async (algorithm: EcdsaParams, data: BufferSource): Promise<ArrayBuffer> => {
      const hashName = typeof algorithm.hash === "string" ? algorithm.hash : algorithm.hash?.name;
      const digest = new Uint8Array(await crypto.subtle.digest(hashName ?? hashFor[namedCurve], data));
      const mechanism = new Uint8Array(24);
      new DataView(mechanism.buffer).setBigUint64(0, CKM_ECDSA, true);
      check(s.C_SignInit(h, mechanism, handle), "C_SignInit", uri);
      const signature = new Uint8Array(132);
      const length = new BigUint64Array([BigInt(signature.length)]);
      check(
        s.C_Sign(h, digest, BigInt(digest.length), signature, new Uint8Array(length.buffer)),
        "C_Sign",
        uri,
      );
      return signature.slice(0, Number(length[0])).buffer;
    };
    // One operation at a time per session, as PKCS#11 requires.
    const serialized = (algorithm: EcdsaParams, data: BufferSource) => {
      const next = queue.then(() => tokenSign(algorithm, data));
      queue = next.catch(() => {});
      return next;
    };
    const real = crypto.subtle;
    const subtle = new Proxy(real, {
      get(target, property) {
        if (property === "sign") {
          return (algorithm: EcdsaParams, signingKey: CryptoKey, data: BufferSource) =>
            signingKey === key ? serialized(algorithm, data) : target.sign(algorithm, signingKey, data);
        }
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const provider = {
      subtle,
      getRandomValues: crypto.getRandomValues.bind(crypto),
      randomUUID: crypto.randomUUID.bind(crypto),
    } as Crypto;
    x509.cryptoProvider.set(provider);
    return { key, close: () => lib.close() };
  } catch (err) {
    lib.close();
    throw err;
  }
}

/** node:crypto handles of software ECDSA keys, made once per key. */
const keyObjects = new WeakMap<CryptoKey, KeyObject>();

/**
 * The WebCrypto `sign` that also knows token keys: what {@linkcode openTokenKey} installed. A software ECDSA
 * key (a real `CryptoKey`; a token key is a stand-in object) signs through node:crypto instead, with the same
 * result format (r‖s): the same implementation without the asynchronous operation's overhead, ~25% less CPU
 * for the CA signature every enrollment and renewal costs.
 */
export function signWithProvider(
  algorithm: EcdsaParams,
  key: CryptoKey,
  data: BufferSource,
): Promise<ArrayBuffer> {
  if (key instanceof CryptoKey && key.type === "private" && key.algorithm.name === "ECDSA") {
    let handle = keyObjects.get(key);
    if (!handle) keyObjects.set(key, handle = KeyObject.from(key));
    const hash = (typeof algorithm.hash === "string" ? algorithm.hash : algorithm.hash.name).replace("-", "");
    const bytes = ArrayBuffer.isView(data)
      ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
      : new Uint8Array(data);
    const signature = sign(hash.toLowerCase(), bytes, { key: handle, dsaEncoding: "ieee-p1363" });
    return Promise.resolve(new Uint8Array(signature).buffer);
  }
  return x509.cryptoProvider.get().subtle.sign(algorithm, key, data);
}
