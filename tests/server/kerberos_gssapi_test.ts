/**
 * The GSSAPI binding (shared/pki/gssapi.ts) against a real MIT KDC (tests/helpers/kdc.ts: a throwaway realm
 * with a machine keytab for host/pc1.example.test and a service keytab for HTTP/svc.example.test). The
 * machine's SPNEGO token is accepted and names the machine principal; the same token replayed is refused; a
 * token for a service the realm does not know cannot be made; a missing library is reported with the
 * package to install.
 */
import assert from "node:assert/strict";
import { initTokenWhenReady, KDC_MISSING, startKdc } from "../helpers/kdc.ts";
import { GssError, openGssapi } from "../../shared/pki/gssapi.ts";

if (KDC_MISSING) console.log(`skipped: the Kerberos test needs ${KDC_MISSING}`);

Deno.test("GSSAPI: a missing library is named with its package", () => {
  assert.throws(() => openGssapi({ library: "libgssapi_missing.so.9" }), /libgssapi-krb5-2/);
});

Deno.test({
  name:
    "GSSAPI (real MIT KDC): machine token accepted with its principal, replay refused, unknown service refused",
  ignore: KDC_MISSING !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const realm = await startKdc();
    try {
      const gss = openGssapi({
        acceptorKeytab: realm.httpKeytab,
        clientKeytab: realm.hostKeytab,
      });
      try {
        const token = await initTokenWhenReady(gss, "HTTP@svc.example.test");
        assert.ok(token.length > 100, "a SPNEGO token");
        assert.equal(gss.acceptToken(token), `host/pc1.example.test@${realm.realm}`);
        assert.throws(() => gss.acceptToken(token), GssError, "the same token again is a replay");
        assert.throws(() => gss.initToken("HTTP@nosuch.example.test"), /not found|unknown/i);
        assert.throws(() => gss.acceptToken(new Uint8Array([0x60, 0x03, 0x06, 0x01, 0x00])), GssError);
      } finally {
        gss.close();
      }
    } finally {
      await realm.stop();
    }
  },
});
