/**
 * Enrollment certificate errors name their cause: a real grpc-js client against a real TLS
 * endpoint whose certificate is untrusted ("unknown authority") or issued for another name
 * ("name mismatch").
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { buildAgentConfig } from "../../agent/config.ts";
import { enroll, EnrollmentError } from "../../agent/enroll.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { isEnrolled } from "../../agent/identity.ts";
import { systemTrustStore } from "../../agent/client.ts";

async function openssl(args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
}

async function tlsServer(dir: string, name: string) {
  await openssl([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    `${dir}/key.pem`,
    "-out",
    `${dir}/cert.pem`,
    "-days",
    "1",
    "-subj",
    `/CN=${name}`,
    "-addext",
    `subjectAltName=DNS:${name}`,
  ]);
  const cert = await Deno.readTextFile(`${dir}/cert.pem`);
  const server = http2.createSecureServer({ key: await Deno.readTextFile(`${dir}/key.pem`), cert });
  server.on("stream", (stream) => stream.close());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return { cert, port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

Deno.test("enrollment names the certificate problem: unknown authority, then name mismatch", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-agent-tls-" });
  const server = await tlsServer(dir, "svc.other.example");
  try {
    const { config } = buildAgentConfig({
      server: { address: "localhost", enrollment_port: server.port },
      agent: { client_id: "n1" },
      enrollment: { data_dir: `${dir}/data` },
    }, "agent.yaml");
    const attempt = (trustStore: string) =>
      enroll({ config, configPath: "agent.yaml", token: "t", logger: SILENT_LOGGER, trustStore });

    // The system trust store does not know this self-signed certificate.
    await assert.rejects(attempt(await systemTrustStore()), (err: Error) => {
      assert.ok(err instanceof EnrollmentError);
      assert.match(err.message, /certificate signed by unknown authority/);
      assert.match(err.message, /insecure_skip_verify: true in agent\.yaml/);
      return true;
    });
    assert.equal(await isEnrolled(`${dir}/data`), false, "nothing written");
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});
