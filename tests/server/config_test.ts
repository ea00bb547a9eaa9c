import assert from "node:assert/strict";
import { parse } from "yaml";
import {
  CONFIG_KEYS,
  ConfigError,
  envNameFor,
  loadConfig,
  resolveConfig,
} from "../../server/config/config.ts";

Deno.test("defaults match the specification", () => {
  const c = resolveConfig({}, {});
  assert.equal(c.server.enrollmentPort, 8443);
  assert.equal(c.server.policyPort, 8444);
  assert.equal(c.metrics.listenAddr, "127.0.0.1:9090");
  assert.equal(c.database.url, "");
});

Deno.test("environment wins over the file, the file over defaults", () => {
  const c = resolveConfig(
    { "server.enrollment_port": 9443, "server.policy_port": 9444, "metrics.listen_addr": "0.0.0.0:9100" },
    {
      SVC_SERVER_ENROLLMENT_PORT: "10443",
      SVC_METRICS_ADDR: "127.0.0.1:9200",
      SVC_SERVER_HOSTNAMES: "a.example, b",
    },
  );
  assert.equal(c.server.enrollmentPort, 10443);
  assert.equal(c.server.policyPort, 9444);
  assert.equal(c.metrics.listenAddr, "127.0.0.1:9200");
  assert.deepEqual(c.server.hostnames, ["a.example", "b"]);
});

Deno.test("the spec's environment names are honoured", () => {
  const c = resolveConfig({}, {
    SVC_METRICS_TOKEN: "tok",
    SVC_METRICS_TLS_CERT_FILE: "/c",
    SVC_METRICS_TLS_KEY_FILE: "/k",
    JWT_SECRET: "x".repeat(32),
  });
  assert.equal(c.metrics.bearerToken, "tok");
  assert.equal(c.metrics.tlsCertFile, "/c");
  assert.equal(c.security.jwtSecret, "x".repeat(32));
  assert.equal(envNameFor({ key: "server.enrollment_port" }), "SVC_SERVER_ENROLLMENT_PORT");
});

const BAD: Array<[Record<string, unknown>, Record<string, string>, RegExp]> = [
  [{ "server.policy_port": 70000 }, {}, /server\.policy_port: 70000 is above the maximum 65535/],
  [
    {},
    { SVC_SERVER_ENROLLMENT_PORT: "eighty" },
    /SVC_SERVER_ENROLLMENT_PORT: "eighty" is not a whole number/,
  ],
  [
    { "tls.cert_file": "/etc/svc/web.crt" },
    {},
    /tls\.cert_file and tls\.key_file: both must be set or neither/,
  ],
  [{ "ca.key_file": "/k" }, {}, /ca\.cert_file and ca\.key_file: both must be set or neither/],
  [
    {},
    { SVC_METRICS_TLS_CERT_FILE: "/c" },
    /metrics\.tls_cert_file and metrics\.tls_key_file: both must be set or neither/,
  ],
  [{ "metrics.listen_addr": "localhost" }, {}, /metrics\.listen_addr: "localhost" is not host:port/],
  [{ "database.url": "mysql://x" }, {}, /database\.url: must be a postgres:\/\//],
  [{}, { JWT_SECRET: "short" }, /JWT_SECRET: must be at least 32 bytes/],
  [{ "audit.syslog.format": "xml" }, {}, /audit\.syslog\.format: "xml" is not one of cef, ocsf/],
  [{ "ca.key_type": "P-521" }, {}, /ca\.key_type: "P-521" is not one of P-256, P-384/],
  [{ "audit.syslog.enabled": "maybe" }, {}, /audit\.syslog\.enabled: "maybe" is not a boolean/],
  [{ "server.hostnames": { a: 1 } }, {}, /server\.hostnames: expected a list/],
  [{ "server.polcy_port": 1 }, {}, /unknown configuration key "server\.polcy_port"/],
  [{ "security.admin_token": "short" }, {}, /security\.admin_token: must be at least 24 characters/],
];

for (const [file, env, message] of BAD) {
  Deno.test(`config error names the key: ${message.source.slice(0, 60)}`, () => {
    assert.throws(
      () => resolveConfig(file, env),
      (err: Error) => err instanceof ConfigError && message.test(err.message),
    );
  });
}

Deno.test("YAML file: nested sections, invalid YAML and an explicit missing file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/server.yaml`;
    await Deno.writeTextFile(path, "server:\n  policy_port: 9555\n  hostnames: [svc.example]\n");
    const c = await loadConfig({ path, env: {} });
    assert.equal(c.server.policyPort, 9555);
    assert.deepEqual(c.server.hostnames, ["svc.example"]);
    await Deno.writeTextFile(path, "server: [unclosed\n");
    await assert.rejects(loadConfig({ path, env: {} }), /is not valid YAML/);
    await assert.rejects(
      loadConfig({ path: `${dir}/none.yaml`, explicitPath: true, env: {} }),
      /cannot read/,
    );
    const implicit = await loadConfig({ path: `${dir}/none.yaml`, env: {} });
    assert.equal(implicit.server.enrollmentPort, 8443);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the packaged example documents every key with its default and loads cleanly", async () => {
  const text = await Deno.readTextFile(new URL("../../packaging/server.yaml", import.meta.url));
  const doc = parse(text) as Record<string, Record<string, unknown>>;
  const flat = new Map<string, unknown>();
  const walk = (prefix: string, node: Record<string, unknown>) => {
    for (const [k, v] of Object.entries(node)) {
      const key = prefix ? `${prefix}.${k}` : k;
      if (v && typeof v === "object" && !Array.isArray(v)) walk(key, v as Record<string, unknown>);
      else flat.set(key, v);
    }
  };
  walk("", doc);
  for (const spec of CONFIG_KEYS) {
    assert.ok(flat.has(spec.key), `packaging/server.yaml lacks ${spec.key}`);
    assert.deepEqual(flat.get(spec.key), spec.default, `packaging/server.yaml default of ${spec.key}`);
  }
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/s.yaml`, text);
    await loadConfig({ path: `${dir}/s.yaml`, env: {} });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
