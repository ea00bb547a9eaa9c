/**
 * The deploy-agent script for every distribution family: valid POSIX shell (`sh -n` and `dash -n`), the
 * repository and key handling each family needs, checksum-checked downloads for Alpine and Arch, and a
 * hostile token that cannot break out of its quoting (run for real by `sh`). The Debian script is executed
 * end to end by tests/e2e/install_test.ts.
 */
import assert from "node:assert/strict";
import { deployScript, FAMILIES } from "../../web/src/deploy_script.ts";

const CA = "-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n";
const KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENfakeKEY\n-----END PGP PUBLIC KEY BLOCK-----\n";
const PACKAGES = [
  {
    path: "deb/pool/main/s/svc-agent/svc-agent_1-1_amd64.deb",
    format: "deb",
    arch: "amd64",
    sha256: "a".repeat(64),
  },
  { path: "apk/svc-agent-1-r1.aarch64.apk", format: "apk", arch: "arm64", sha256: "b".repeat(64) },
  { path: "arch/svc-agent-1-1-x86_64.pkg.tar.zst", format: "arch", arch: "amd64", sha256: "c".repeat(64) },
];

async function syntaxOk(shell: string, script: string): Promise<string> {
  const out = await new Deno.Command(shell, { args: ["-n"], stdin: "piped", stderr: "piped" }).spawn();
  const w = out.stdin.getWriter();
  await w.write(new TextEncoder().encode(script));
  await w.close();
  const r = await out.output();
  return r.success ? "" : new TextDecoder().decode(r.stderr);
}

Deno.test("deploy script: every family and arch is valid shell with its repository steps", async () => {
  for (const { id } of FAMILIES) {
    for (const arch of ["amd64", "arm64"] as const) {
      const script = deployScript({
        origin: "https://svc.example.test:8443",
        family: id,
        arch,
        caPem: CA,
        repoKey: KEY,
        packages: PACKAGES,
        enrollment: { token: "tok-123", policyPort: 8444 },
      });
      for (const shell of ["sh", "dash"]) {
        assert.equal(await syntaxOk(shell, script), "", `${id}/${arch} (${shell})`);
      }
      assert.ok(script.includes("MIIBfakeCA"), id);
      assert.match(script, /^set -eu$/m);
      assert.match(
        script,
        /svc-agent --config \/etc\/svc\/agent\.yaml --token-file \/etc\/svc\/enrollment-token/,
      );
      assert.match(script, /policy_port: 8444/);
      if (id === "debian") {
        assert.match(script, /^Signed-By: \/etc\/apt\/keyrings\/svc-agent\.asc$/m);
        assert.match(script, new RegExp(`^Architectures: ${arch}$`, "m"));
      }
      if (id === "fedora" || id === "opensuse") {
        assert.match(script, /^repo_gpgcheck=1$/m);
        assert.match(script, /^gpgcheck=1$/m);
        assert.match(script, /^baseurl=https:\/\/svc\.example\.test:8443\/agent\/rpm$/m);
      }
      if (id === "alpine") {
        if (arch === "arm64") {
          assert.match(
            script,
            new RegExp(
              `^echo "${"b".repeat(64)}  /tmp/svc-agent-1-r1\\.aarch64\\.apk" \\| sha256sum -c -$`,
              "m",
            ),
          );
          assert.match(script, /^apk add --allow-untrusted \/tmp\/svc-agent-1-r1\.aarch64\.apk$/m);
        } else {
          // No amd64 apk in this manifest: the script stops with a message instead of installing something else.
          assert.match(script, /this server has no apk package for amd64/);
        }
        assert.doesNotMatch(script, /systemctl enable/);
      }
      if (id === "arch" && arch === "amd64") {
        assert.match(script, /sha256sum -c -$/m);
        assert.match(script, /^pacman -U --noconfirm \/tmp\/svc-agent-1-1-x86_64\.pkg\.tar\.zst$/m);
      }
    }
  }
});

Deno.test("deploy script: a hostile token stays one literal word", async () => {
  const token = `x'; touch /tmp/svc-pwned-$$; echo '$(id)\`id\``;
  const script = deployScript({
    origin: "https://svc.example.test",
    family: "debian",
    arch: "amd64",
    caPem: CA,
    repoKey: KEY,
    packages: PACKAGES,
    enrollment: { token, policyPort: 8444 },
  });
  const line = script.split("\n").find((l) => l.includes("/etc/svc/enrollment-token)"))!;
  const dir = await Deno.makeTempDir({ prefix: "svc-token-quote-" });
  try {
    const cmd = line.replace("/etc/svc/enrollment-token", `${dir}/token`);
    const r = await new Deno.Command("sh", { args: ["-c", cmd], stderr: "piped" }).output();
    assert.ok(r.success, new TextDecoder().decode(r.stderr));
    assert.equal(await Deno.readTextFile(`${dir}/token`), `${token}\n`);
    assert.equal((await Deno.stat(`${dir}/token`)).mode! & 0o777, 0o600);
    assert.match(script, /enrollment_port: 443\//, "no port in the origin means 443");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
