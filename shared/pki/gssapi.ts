/**
 * SPNEGO/Kerberos through the system's GSSAPI (MIT krb5's `libgssapi_krb5.so.2`) over Deno's FFI: the
 * machine builds a token for the server's service principal from its keytab, the server accepts it with
 * its own keytab and learns the client principal. No Kerberos cryptography here: the library does all of
 * it, including its replay cache (a token accepted once is refused the second time).
 *
 * Keytabs are the library's usual environment settings, set by {@linkcode openGssapi}: `KRB5_KTNAME` (the
 * acceptor's, e.g. the `HTTP/<host>` key) and `KRB5_CLIENT_KTNAME` (the initiator's, e.g. `host/<fqdn>`).
 * Structures are laid out for LP64 Linux (amd64, arm64).
 *
 * Used by `KerberosEnroll`: the agent's default SPNEGO provider (agent/enroll.ts) and the server's
 * acceptor (server/grpc/kerberos_enroll.ts). Both need the runtime's FFI permission (`--allow-ffi`).
 *
 * @module
 */

const SYMBOLS = {
  gss_import_name: { parameters: ["buffer", "buffer", "buffer", "buffer"], result: "u32" },
  gss_init_sec_context: {
    parameters: [
      "buffer",
      "pointer",
      "buffer",
      "pointer",
      "buffer",
      "u32",
      "u32",
      "pointer",
      "pointer",
      "pointer",
      "buffer",
      "pointer",
      "pointer",
    ],
    result: "u32",
  },
  gss_accept_sec_context: {
    parameters: [
      "buffer",
      "buffer",
      "pointer",
      "buffer",
      "pointer",
      "buffer",
      "pointer",
      "buffer",
      "pointer",
      "pointer",
      "pointer",
    ],
    result: "u32",
  },
  gss_display_name: { parameters: ["buffer", "pointer", "buffer", "pointer"], result: "u32" },
  gss_display_status: { parameters: ["buffer", "u32", "i32", "pointer", "buffer", "buffer"], result: "u32" },
  gss_release_buffer: { parameters: ["buffer", "buffer"], result: "u32" },
  gss_release_name: { parameters: ["buffer", "buffer"], result: "u32" },
  gss_delete_sec_context: { parameters: ["buffer", "buffer", "pointer"], result: "u32" },
} as const;

const GSS_S_COMPLETE = 0;
const GSS_S_CONTINUE_NEEDED = 1;
const GSS_C_GSS_CODE = 1;
const GSS_C_MECH_CODE = 2;
const GSS_C_MUTUAL_FLAG = 2;
const GSS_C_SEQUENCE_FLAG = 8;
/** 1.3.6.1.5.5.2 */
const SPNEGO_OID = new Uint8Array([0x2b, 0x06, 0x01, 0x05, 0x05, 0x02]);
/** 1.2.840.113554.1.2.1.4, GSS_C_NT_HOSTBASED_SERVICE ("service@host") */
const HOSTBASED_SERVICE_OID = new Uint8Array([0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x01, 0x04]);

/** A GSSAPI refusal; the message carries the library's own explanation. */
export class GssError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GssError";
  }
}

/** The SPNEGO operations svc needs. */
export interface Gssapi {
  /** A SPNEGO token for `service@host` (e.g. `HTTP@svc.example.org`) from the initiator keytab. */
  initToken(target: string): Uint8Array;
  /** Accepts a client's token with the acceptor keytab; returns the client principal (`host/pc@REALM`). */
  acceptToken(token: Uint8Array): string;
  close(): void;
}

/** Options of {@linkcode openGssapi}. */
export interface GssapiOptions {
  /** Library to load; default `libgssapi_krb5.so.2`. */
  library?: string;
  /** Acceptor keytab (sets `KRB5_KTNAME`). */
  acceptorKeytab?: string;
  /** Initiator keytab (sets `KRB5_CLIENT_KTNAME`). */
  clientKeytab?: string;
}

function pointerOf(bytes: Uint8Array): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes as Uint8Array<ArrayBuffer>)));
}

/** A gss_buffer_desc: { size_t length; void *value; }. */
function bufferDesc(data?: Uint8Array): Uint8Array<ArrayBuffer> {
  const desc = new Uint8Array(16);
  if (data && data.length > 0) {
    const view = new DataView(desc.buffer);
    view.setBigUint64(0, BigInt(data.length), true);
    view.setBigUint64(8, pointerOf(data), true);
  }
  return desc;
}

/** A gss_OID_desc: { OM_uint32 length; void *elements; } (padded to 16 bytes). */
function oidDesc(der: Uint8Array): Uint8Array<ArrayBuffer> {
  const desc = new Uint8Array(16);
  const view = new DataView(desc.buffer);
  view.setUint32(0, der.length, true);
  view.setBigUint64(8, pointerOf(der), true);
  return desc;
}

function readBuffer(desc: Uint8Array): Uint8Array {
  const view = new DataView(desc.buffer, desc.byteOffset);
  const length = Number(view.getBigUint64(0, true));
  const pointer = Deno.UnsafePointer.create(view.getBigUint64(8, true));
  if (!pointer || length === 0) return new Uint8Array(0);
  return new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(pointer, length)).slice();
}

/**
 * Loads the library and sets the keytabs.
 *
 * @throws {GssError} when the library is not installed (naming the package)
 */
export function openGssapi(options: GssapiOptions = {}): Gssapi {
  const library = options.library ?? "libgssapi_krb5.so.2";
  let lib: Deno.DynamicLibrary<typeof SYMBOLS>;
  try {
    lib = Deno.dlopen(library, SYMBOLS);
  } catch (err) {
    throw new GssError(
      `Kerberos needs the system GSSAPI library ${library} (Debian/Ubuntu: libgssapi-krb5-2, Fedora: krb5-libs): ` +
        (err as Error).message,
    );
  }
  if (options.acceptorKeytab) Deno.env.set("KRB5_KTNAME", options.acceptorKeytab);
  if (options.clientKeytab) Deno.env.set("KRB5_CLIENT_KTNAME", options.clientKeytab);
  const s = lib.symbols;
  // Kept alive as long as the library is: the descriptors point into them.
  const spnego = oidDesc(SPNEGO_OID);
  const hostbased = oidDesc(HOSTBASED_SERVICE_OID);
  const minor = new Uint32Array(1);
  const minorBytes = new Uint8Array(minor.buffer);

  const statusText = (code: number, type: number): string => {
    const parts: string[] = [];
    const context = new Uint32Array(1);
    const m = new Uint8Array(4);
    do {
      const out = bufferDesc();
      if (s.gss_display_status(m, code, type, null, new Uint8Array(context.buffer), out) !== GSS_S_COMPLETE) {
        break;
      }
      parts.push(new TextDecoder().decode(readBuffer(out)));
      s.gss_release_buffer(m, out);
    } while (context[0] !== 0);
    return parts.join("; ");
  };
  const fail = (call: string, major: number): GssError => {
    const mechanism = minor[0] !== 0 ? statusText(minor[0], GSS_C_MECH_CODE) : "";
    return new GssError(
      `${call}: ${statusText(major, GSS_C_GSS_CODE)}${mechanism ? ` (${mechanism})` : ""}`,
    );
  };
  const deleteContext = (handle: BigUint64Array) => {
    if (handle[0] !== 0n) s.gss_delete_sec_context(minorBytes, new Uint8Array(handle.buffer), null);
  };

  return {
    initToken(target) {
      const nameBytes = new TextEncoder().encode(target);
      const name = new BigUint64Array(1);
      let major = s.gss_import_name(
        minorBytes,
        bufferDesc(nameBytes),
        hostbased,
        new Uint8Array(name.buffer),
      );
      if (major !== GSS_S_COMPLETE) throw fail(`importing the service name ${target}`, major);
      const context = new BigUint64Array(1);
      const out = bufferDesc();
      try {
        major = s.gss_init_sec_context(
          minorBytes,
          null,
          new Uint8Array(context.buffer),
          Deno.UnsafePointer.create(name[0]),
          spnego,
          GSS_C_MUTUAL_FLAG | GSS_C_SEQUENCE_FLAG,
          0,
          null,
          null,
          null,
          out,
          null,
          null,
        );
        if (major !== GSS_S_COMPLETE && major !== GSS_S_CONTINUE_NEEDED) {
          throw fail(`building a Kerberos token for ${target}`, major);
        }
        return readBuffer(out);
      } finally {
        s.gss_release_buffer(minorBytes, out);
        s.gss_release_name(minorBytes, new Uint8Array(name.buffer));
        deleteContext(context);
      }
    },
    acceptToken(token) {
      const context = new BigUint64Array(1);
      const source = new BigUint64Array(1);
      const out = bufferDesc();
      const input = token.slice();
      try {
        const major = s.gss_accept_sec_context(
          minorBytes,
          new Uint8Array(context.buffer),
          null,
          bufferDesc(input),
          null,
          new Uint8Array(source.buffer),
          null,
          out,
          null,
          null,
          null,
        );
        if (major !== GSS_S_COMPLETE) {
          throw major === GSS_S_CONTINUE_NEEDED
            ? new GssError("the Kerberos token needs another round trip; send a complete AP-REQ")
            : fail("accepting the Kerberos token", major);
        }
        const display = bufferDesc();
        const m = s.gss_display_name(minorBytes, Deno.UnsafePointer.create(source[0]), display, null);
        if (m !== GSS_S_COMPLETE) throw fail("reading the client principal", m);
        const principal = new TextDecoder().decode(readBuffer(display));
        s.gss_release_buffer(minorBytes, display);
        return principal;
      } finally {
        s.gss_release_buffer(minorBytes, out);
        if (source[0] !== 0n) s.gss_release_name(minorBytes, new Uint8Array(source.buffer));
        deleteContext(context);
      }
    },
    close: () => lib.close(),
  };
}
