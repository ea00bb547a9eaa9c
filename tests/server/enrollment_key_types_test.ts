// Enrollment refuses every key type but ECDSA P-256 (spec), naming the type the request used and the one
// required, with real CSRs from openssl and WebCrypto; and it answers token problems by shape: empty,
// over-long or control-character tokens are INVALID_ARGUMENT without touching any token, every other wrong
// token is UNAUTHENTICATED (the shared hostile-string corpus supplies the shapes).

import assert from "node:assert/strict";
import { mustRun } from "../helpers/command.ts";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import { createGroup, enrollmentClient, enrollmentToken, withAgentServer } from "../helpers/agents.ts";
import { HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { generateKeyAndCsr, toPem, x509 } from "../../shared/pki/csr.ts";

async function grpcFailure(promise: Promise<unknown>): Promise<GrpcError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof GrpcError, `expected a GrpcError, got ${err}`);
    return err;
  }
  throw new Error("the call succeeded");
}

/** A CSR made by openssl for `newkey` options (e.g. `["ec", "-pkeyopt", "ec_paramgen_curve:P-384"]`). */
async function opensslCsr(newkey: string[]): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "svc-csr-" });
  try {
    await mustRun("openssl", [
      ...["req", "-new", "-newkey", ...newkey, "-nodes", "-subj", "/CN=pc"],
      ...["-keyout", `${dir}/key.pem`, "-out", `${dir}/csr.pem`],
    ]);
    return await Deno.readTextFile(`${dir}/csr.pem`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A CSR made with WebCrypto for `algorithm`. */
async function webCryptoCsr(algorithm: EcKeyGenParams | Algorithm, signing: Algorithm | EcdsaParams) {
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: "CN=pc",
    keys,
    signingAlgorithm: signing,
  });
  return toPem(csr.rawData, "CERTIFICATE REQUEST");
}

const HAVE_OPENSSL = await new Deno.Command("openssl", { args: ["version"], stdout: "null", stderr: "null" })
  .output().then((o) => o.success, () => false);

dbTest(
  "only ECDSA P-256 requests get an agent certificate; other key types are named and refused",
  async (db) => {
    if (!HAVE_OPENSSL) {
      console.warn("skipped the openssl half: openssl is not installed (.ci/run installs it)");
    }
    await withAgentServer(db, async (server) => {
      const group = await createGroup(db, "lab");
      const client = enrollmentClient(server);
      try {
        const refused: [string, () => Promise<string>, RegExp][] = [
          [
            "WebCrypto P-384",
            () =>
              webCryptoCsr(
                { name: "ECDSA", namedCurve: "P-384" },
                { name: "ECDSA", hash: "SHA-384" } as EcdsaParams,
              ),
            /an ECDSA P-384 key/,
          ],
          [
            "WebCrypto P-521",
            () =>
              webCryptoCsr(
                { name: "ECDSA", namedCurve: "P-521" },
                { name: "ECDSA", hash: "SHA-512" } as EcdsaParams,
              ),
            /an ECDSA P-521 key/,
          ],
          [
            "WebCrypto Ed25519",
            () => webCryptoCsr({ name: "Ed25519" }, { name: "Ed25519" }),
            /an Ed25519 key/,
          ],
        ];
        if (HAVE_OPENSSL) {
          refused.push(
            [
              "openssl P-384",
              () => opensslCsr(["ec", "-pkeyopt", "ec_paramgen_curve:P-384"]),
              /an ECDSA P-384 key/,
            ],
            [
              "openssl P-521",
              () => opensslCsr(["ec", "-pkeyopt", "ec_paramgen_curve:P-521"]),
              /an ECDSA P-521 key/,
            ],
            ["openssl Ed25519", () => opensslCsr(["ed25519"]), /an Ed25519 key/],
            ["openssl RSA 3072", () => opensslCsr(["rsa:3072"]), /an RSA 3072-bit key/],
          );
        }
        for (const [i, [label, make, used]] of refused.entries()) {
          const err = await grpcFailure(
            client.enroll({
              enrollmentToken: await enrollmentToken(db, group),
              csrPem: await make(),
              nodeName: `k-${i}`,
            }),
          );
          assert.equal(
            err.code,
            grpc.status.INVALID_ARGUMENT,
            `${label}: ${grpc.status[err.code]} ${err.message}`,
          );
          assert.match(err.message, /^csr_pem: the certificate request uses /, label);
          assert.match(err.message, used, label);
          assert.match(err.message, /agent certificates need an ECDSA P-256 key/, label);
        }
        const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM nodes");
        assert.equal(n, 0, "no node was created for a refused key");
        const [{ left }] = await db.query<{ left: number }>(
          "SELECT count(*)::int AS left FROM enrollment_tokens",
        );
        assert.equal(left, 0, "the token of a refused request is burnt");

        const accepted = [(await generateKeyAndCsr("pc")).csrPem];
        if (HAVE_OPENSSL) {
          accepted.push(await opensslCsr(["ec", "-pkeyopt", "ec_paramgen_curve:P-256"]));
        }
        for (const [i, csrPem] of accepted.entries()) {
          const res = await client.enroll({
            enrollmentToken: await enrollmentToken(db, group),
            csrPem,
            nodeName: `ok-${i}`,
          });
          const cert = new x509.X509Certificate(res.signedCertPem);
          assert.deepEqual(
            {
              name: cert.publicKey.algorithm.name,
              curve: (cert.publicKey.algorithm as EcKeyAlgorithm).namedCurve,
            },
            { name: "ECDSA", curve: "P-256" },
          );
        }
      } finally {
        client.close();
      }
    });
  },
);

dbTest(
  "enrollment tokens: malformed → INVALID_ARGUMENT untouched, any other wrong one → UNAUTHENTICATED",
  async (db) => {
    await withAgentServer(db, async (server) => {
      const group = await createGroup(db, "lab");
      const { csrPem } = await generateKeyAndCsr("pc");
      const client = enrollmentClient(server);
      try {
        const real = await enrollmentToken(db, group);
        const malformed: [string, string][] = [
          ["empty", ""],
          ["spaces only", "   "],
          ["NUL", "\0"],
          ["NUL inside", `${real.slice(0, 10)}\0${real.slice(10)}`],
          ["newline", `${real}\n`],
          ["513 characters", "a".repeat(513)],
          ["64 KiB", "a".repeat(64 * 1024)],
        ];
        for (const [label, token] of malformed) {
          const err = await grpcFailure(client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-1" }));
          assert.equal(
            err.code,
            grpc.status.INVALID_ARGUMENT,
            `${label}: ${grpc.status[err.code]} ${err.message}`,
          );
          assert.match(err.message, /^enrollment_token: /, label);
        }

        // Every other shape of a wrong token — the hostile corpus without the malformed ones, and tokens that
        // look like real ones — is simply not a token.
        const wrong = [
          "made-up",
          crypto.randomUUID(),
          "A".repeat(43),
          "a".repeat(512),
          `${real}x`,
          real.slice(1),
          real.toUpperCase() === real ? real.toLowerCase() : real.toUpperCase(),
          ...HOSTILE_STRINGS.map((h) => h.value).filter((v) =>
            v.trim() !== "" && v.length <= 512 && ![...v].some((c) => c.charCodeAt(0) < 0x20 || c === "\x7f")
          ),
        ];
        for (const token of wrong) {
          const err = await grpcFailure(client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-1" }));
          assert.equal(
            err.code,
            grpc.status.UNAUTHENTICATED,
            `${JSON.stringify(token.slice(0, 40))}: ${grpc.status[err.code]} ${err.message}`,
          );
          assert.match(err.message, /enrollment token is invalid or was already used/);
        }
        // None of that touched the real token: it still enrolls.
        const ok = await client.enroll({ enrollmentToken: real, csrPem, nodeName: "pc-1" });
        assert.ok(ok.nodeId);
      } finally {
        client.close();
      }
    });
  },
);
