/**
 * Agent configuration (defaults, values, messages naming the key, file mode warning), the
 * command line, token precedence, and the entry point's behaviour without enrollment.
 */
import assert from "node:assert/strict";
import { AgentConfigError, buildAgentConfig, loadAgentConfig } from "../../agent/config.ts";
import { CliError, NOT_ENROLLED_MESSAGE, parseCliArgs, resolveEnrollmentToken } from "../../agent/cli.ts";

const MAIN = new URL("../../agent/main.ts", import.meta.url).pathname;

async function withTemp(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "svc-agent-config-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("defaults: localhost:8443/8444, verification on, root /, data dir, client id = host name", () => {
  const { config, warnings } = buildAgentConfig({}, "agent.yaml", { hostname: "desk-42" });
  assert.deepEqual(warnings, []);
  assert.deepEqual(config.server, {
    address: "localhost",
    enrollmentPort: 8443,
    policyPort: 8444,
    insecureSkipVerify: false,
    silenceTimeoutSeconds: 20,
  });
  assert.deepEqual(config.agent, {
    clientId: "desk-42",
    rootDir: "/",
    reevaluateIntervalSeconds: 300,
    statusFile: "/run/svc-agent/status.json",
  });
  assert.equal(config.enrollment.dataDir, "/var/lib/svc-agent");
  assert.equal(config.firefox.policiesPath, "/etc/firefox/policies/policies.json");
  assert.equal(config.notifications.enabled, true);
  assert.equal(config.log.level, "info");
});

Deno.test("values from the file override defaults; unknown keys are warned about", () => {
  const { config, warnings } = buildAgentConfig({
    server: {
      address: "svc.example.com",
      enrollment_port: 443,
      policy_port: 9444,
      insecure_skip_verify: true,
    },
    agent: { client_id: "ws-7", root_dir: "/srv/root" },
    enrollment: { data_dir: "/tmp/d" },
    firefox: { policies_path: "/opt/ff/policies.json" },
    notifications: { enabled: false },
    log: { level: "debug" },
    sever: { adress: "typo" },
  }, "agent.yaml");
  assert.equal(config.server.address, "svc.example.com");
  assert.equal(config.server.enrollmentPort, 443);
  assert.equal(config.server.policyPort, 9444);
  assert.equal(config.server.insecureSkipVerify, true);
  assert.deepEqual(config.agent, {
    clientId: "ws-7",
    rootDir: "/srv/root",
    reevaluateIntervalSeconds: 300,
    statusFile: "/run/svc-agent/status.json",
  });
  assert.equal(config.firefox.policiesPath, "/opt/ff/policies.json");
  assert.equal(config.notifications.enabled, false);
  assert.deepEqual(warnings, ['unknown key "sever.adress" in agent.yaml is ignored; check its spelling']);
});

Deno.test("bad values stop with a message naming the key and the fix", () => {
  const cases: [unknown, RegExp][] = [
    [
      { server: { address: "https://svc.example.com" } },
      /server\.address in f\.yaml .* without scheme, port or path/,
    ],
    [{ server: { address: "svc:8443" } }, /server\.address in f\.yaml/],
    [
      { server: { enrollment_port: 70000 } },
      /server\.enrollment_port in f\.yaml must be a port number from 1 to 65535/,
    ],
    [{ server: { policy_port: "8444" } }, /server\.policy_port in f\.yaml must be a port number/],
    [
      { server: { insecure_skip_verify: "yes" } },
      /server\.insecure_skip_verify in f\.yaml must be true or false/,
    ],
    [
      { agent: { client_id: "bad name/../x" } },
      /agent\.client_id in f\.yaml "bad name\/\.\.\/x" must start with/,
    ],
    [{ agent: { root_dir: "relative" } }, /agent\.root_dir in f\.yaml must be an absolute path/],
    [
      { firefox: { policies_path: "/etc/../shadow" } },
      /firefox\.policies_path in f\.yaml must be a plain absolute path/,
    ],
    [{ firefox: { flatpak_policies_path: "/var/{arch}/../x" } }, /firefox\.flatpak_policies_path/],
    [{ log: { level: "loud" } }, /log\.level in f\.yaml must be one of debug, info, warn, error/],
    [["list"], /f\.yaml must be a YAML mapping/],
  ];
  for (const [tree, pattern] of cases) {
    assert.throws(() => buildAgentConfig(tree, "f.yaml"), (err: Error) => {
      assert.ok(err instanceof AgentConfigError);
      assert.match(err.message, pattern);
      return true;
    });
  }
  assert.throws(
    () => buildAgentConfig({}, "f.yaml", { hostname: "weird host" }),
    /agent\.client_id is empty and the host name .* set agent\.client_id in f\.yaml/,
  );
});

Deno.test("config file: mode looser than 0600 is warned about; missing explicit file is an error", async () => {
  await withTemp(async (dir) => {
    const path = `${dir}/agent.yaml`;
    await Deno.writeTextFile(path, "server:\n  address: svc.example.com\n");
    await Deno.chmod(path, 0o644);
    const loose = await loadAgentConfig(path, { explicit: true, hostname: "h" });
    assert.equal(loose.config.server.address, "svc.example.com");
    assert.deepEqual(loose.warnings, [
      `configuration file ${path} has mode 0644; it should be 0600 (run: chmod 600 ${path})`,
    ]);
    await Deno.chmod(path, 0o600);
    assert.deepEqual((await loadAgentConfig(path, { explicit: true, hostname: "h" })).warnings, []);
    await assert.rejects(
      loadAgentConfig(`${dir}/missing.yaml`, { explicit: true }),
      /configuration file .*missing\.yaml does not exist; create it or pass another --config/,
    );
    const defaults = await loadAgentConfig(`${dir}/missing.yaml`, { hostname: "h" });
    assert.match(defaults.warnings[0], /does not exist; using built-in defaults/);
    await Deno.writeTextFile(path, "server: [unclosed");
    await assert.rejects(loadAgentConfig(path, { explicit: true }), /is not valid YAML/);
  });
});

Deno.test("the packaged default config loads and sets insecure_skip_verify: true", async () => {
  const path = new URL("../../packaging/agent.yaml", import.meta.url).pathname;
  const { config, warnings } = await loadAgentConfig(path, { explicit: true, hostname: "h" });
  assert.equal(config.server.insecureSkipVerify, true);
  assert.equal(config.server.address, "localhost");
  assert.ok(warnings.every((w) => w.includes("has mode")), warnings.join());
});

Deno.test("command line: options parsed, mistakes named", () => {
  assert.deepEqual(parseCliArgs([]), {
    configPath: "/etc/svc/agent.yaml",
    configExplicit: false,
    tokenFile: undefined,
    token: undefined,
    help: false,
    version: false,
  });
  const args = parseCliArgs(["--config", "/x.yaml", "--token-file", "/t"]);
  assert.equal(args.configPath, "/x.yaml");
  assert.equal(args.configExplicit, true);
  assert.equal(args.tokenFile, "/t");
  assert.throws(() => parseCliArgs(["--bogus"]), CliError);
  assert.throws(() => parseCliArgs(["stray"]), CliError);
  assert.throws(() => parseCliArgs(["--token-file"]), CliError);
});

Deno.test("token precedence: --token-file > SVC_ENROLLMENT_TOKEN > --token (deprecated, warned)", async () => {
  await withTemp(async (dir) => {
    const file = `${dir}/token`;
    await Deno.writeTextFile(file, "  from-file\n");
    const all = await resolveEnrollmentToken(
      parseCliArgs(["--token-file", file, "--token", "from-flag"]),
      "from-env",
    );
    assert.equal(all.token, "from-file");
    assert.equal(all.source, "token-file");
    assert.match(all.warnings[0], /--token is deprecated/);

    const envOnly = await resolveEnrollmentToken(parseCliArgs(["--token", "from-flag"]), "from-env");
    assert.equal(envOnly.token, "from-env");
    assert.equal(envOnly.source, "environment");

    const flag = await resolveEnrollmentToken(parseCliArgs(["--token", "from-flag"]), undefined);
    assert.equal(flag.token, "from-flag");
    assert.equal(flag.source, "command line");
    assert.equal(flag.warnings.length, 1);
    assert.match(flag.warnings[0], /deprecated: the token is visible to every user in the process list/);

    const none = await resolveEnrollmentToken(parseCliArgs([]), "  ");
    assert.equal(none.token, undefined);

    await Deno.writeTextFile(file, "\n");
    await assert.rejects(resolveEnrollmentToken(parseCliArgs(["--token-file", file]), undefined), /is empty/);
    await assert.rejects(
      resolveEnrollmentToken(parseCliArgs(["--token-file", `${dir}/nope`]), undefined),
      /cannot read the token file/,
    );
  });
});

async function runAgent(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, ...args],
    env: { NO_COLOR: "1", SVC_ENROLLMENT_TOKEN: "", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

Deno.test("svc-agent without enrollment and without a token prints the spec's message and exits 1", async () => {
  await withTemp(async (dir) => {
    const path = `${dir}/agent.yaml`;
    await Deno.writeTextFile(path, `agent:\n  client_id: n1\nenrollment:\n  data_dir: ${dir}/data\n`);
    await Deno.chmod(path, 0o600);
    const result = await runAgent(["--config", path]);
    assert.equal(result.code, 1, result.stderr);
    assert.ok(result.stderr.includes(NOT_ENROLLED_MESSAGE), result.stderr);
    assert.match(result.stderr, /not enrolled and no enrollment token was provided/);

    const bad = await runAgent(["--config", `${dir}/nope.yaml`]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /does not exist/);

    const deprecated = await runAgent(["--config", path, "--token", "t0k"], {});
    assert.match(deprecated.stderr, /--token is deprecated/);
    assert.notEqual(deprecated.code, 0, "no server: enrollment fails");
  });
});

Deno.test("node life and liveness keys: seconds in range, a clear error otherwise", () => {
  const { config } = buildAgentConfig(
    {
      server: { silence_timeout_seconds: 30 },
      agent: { reevaluate_interval_seconds: 60, status_file: "/var/run/x.json" },
    },
    "agent.yaml",
    { hostname: "desk-42" },
  );
  assert.equal(config.server.silenceTimeoutSeconds, 30);
  assert.equal(config.agent.reevaluateIntervalSeconds, 60);
  assert.equal(config.agent.statusFile, "/var/run/x.json");
  // Below 15 s the keepalive would ping more often than the server's 10 s limit allows.
  assert.throws(
    () => buildAgentConfig({ server: { silence_timeout_seconds: 5 } }, "agent.yaml", { hostname: "d" }),
    /server\.silence_timeout_seconds in agent\.yaml must be a whole number of seconds from 15 to 600, not 5/,
  );
  assert.throws(
    () =>
      buildAgentConfig({ agent: { reevaluate_interval_seconds: "soon" } }, "agent.yaml", { hostname: "d" }),
    /agent\.reevaluate_interval_seconds .* not "soon"/,
  );
});
