/**
 * `svc-server healthcheck` (the image's health check) run as a real process: healthy against a running
 * server found from its configuration alone, unhealthy once it stopped, and unhealthy against an impostor on
 * the port that answers a version with a certificate the server's CA did not issue.
 */
import assert from "node:assert/strict";
import { opensslCertificate } from "../helpers/certificates.ts";
import { freePort, startServerProcess } from "../helpers/process.ts";
import { VERSION } from "../../shared/version.ts";

const MAIN = new URL("../../server/main.ts", import.meta.url).pathname;

async function healthcheck(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "healthcheck", ...args],
    env: { NO_COLOR: "1", SVC_CONFIG: "" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("healthcheck: healthy against the running server, unhealthy when stopped or impersonated", async () => {
  const proc = await startServerProcess();
  const dir = await Deno.makeTempDir({ prefix: "svc-health-" });
  try {
    const ok = await healthcheck(["--config", proc.configPath]);
    assert.deepEqual(ok.code, 0, ok.stdout + ok.stderr);
    assert.ok(ok.stdout.includes(`answered version ${VERSION}`), ok.stdout);
    assert.ok(ok.stdout.includes(`https://127.0.0.1:${proc.webPort}/api/v1/version`), ok.stdout);

    // An impostor that answers the same route with a version, under a certificate of another CA.
    const port = freePort();
    // A self-signed certificate for 127.0.0.1: a CA the svc server never saw.
    const { cert, key } = await opensslCertificate(dir, {
      name: "foreign",
      subject: "/CN=127.0.0.1",
      extensions: ["subjectAltName=IP:127.0.0.1"],
    });
    const impostor = Deno.serve(
      { port, hostname: "127.0.0.1", cert, key, onListen: () => {} },
      () => Response.json({ version: VERSION }),
    );
    try {
      const fooled = await healthcheck(["--config", proc.configPath, "--url", `https://127.0.0.1:${port}`]);
      assert.deepEqual(fooled.code, 1, fooled.stdout + fooled.stderr);
      assert.match(fooled.stderr, /unhealthy: .*certificate/i);
    } finally {
      await impostor.shutdown();
    }

    const badUrl = await healthcheck(["--config", proc.configPath, "--url", "ftp://x"]);
    assert.deepEqual(badUrl.code, 2);
    assert.ok(badUrl.stderr.includes(`--url "ftp://x" is not an http(s) URL`), badUrl.stderr);
  } finally {
    assert.deepEqual(await proc.stop(), 0);
  }
  try {
    const down = await healthcheck(["--config", proc.configPath]);
    assert.deepEqual(down.code, 1, down.stdout + down.stderr);
    assert.match(down.stderr, /unhealthy: https:\/\/127\.0\.0\.1:\d+\/api\/v1\/version: /);
  } finally {
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(proc.dataDir, { recursive: true });
  }
});
