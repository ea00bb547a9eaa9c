/**
 * svc-server configuration: defaults, then a YAML file, then the environment (environment wins).
 *
 * Every key is declared once in {@link CONFIG_KEYS}; the environment name is derived from the dotted key
 * (`server.enrollment_port` → `SVC_SERVER_ENROLLMENT_PORT`) unless the spec fixes another name. Errors name
 * the key and say how to fix it, and stop the server before anything listens.
 */
import { parse as parseYaml } from "yaml";
import { CA_KEY_TYPES, type CaKeyType, DEFAULT_CA_KEY_TYPE } from "./ca_key_type.ts";

/** The whole server configuration after defaults, file and environment are merged. */
export interface ServerConfig {
  server: {
    address: string;
    enrollmentPort: number;
    policyPort: number;
    hostnames: string[];
    dataDir: string;
    trustedProxies: string[];
    /** A replica silent for this long is dead; survivors mark its nodes offline. */
    replicaTimeoutSeconds: number;
    /** Processes serving the policy port (reusePort); 1 serves it in the main process. */
    policyWorkers: number;
  };
  /** `poolSize`: connections each server process (main, every policy worker) opens at most, on PostgreSQL. */
  database: { url: string; poolSize: number };
  tls: { certFile: string; keyFile: string };
  /** `keyEncryptionKeyFile` seals the CA key and session secret kept in the database (see server/pki/secret_store.ts). */
  ca: { certFile: string; keyFile: string; keyEncryptionKeyFile: string; keyType: CaKeyType };
  security: {
    adminToken: string;
    adminPassword: string;
    jwtSecret: string;
    accessTokenTtlSeconds: number;
    refreshTokenTtlSeconds: number;
  };
  metrics: { listenAddr: string; bearerToken: string; tlsCertFile: string; tlsKeyFile: string };
  audit: {
    retentionDays: number;
    syslog: {
      enabled: boolean;
      network: string;
      addr: string;
      format: string;
      facility: number;
      tlsCaFile: string;
    };
  };
  agentRepo: { dir: string };
  /** Console live-event streams (`GET /api/v1/events`, server/events/). */
  events: { maxStreams: number; maxStreamsPerUser: number; heartbeatSeconds: number };
  /** How long the trend points (server/trends/) are kept: hourly ones, and the daily ones rolled from them. */
  trends: { hourlyRetentionDays: number; dailyRetentionDays: number };
  log: { level: string; format: string };
  /** Key-encryption key file of escrowed recovery keys; `createKekFile` makes it on first start (dev). */
  diskEncryption: { kekFile: string; createKekFile: boolean };
  /** Kerberos enrollment (see server/grpc/kerberos_enroll.ts). */
  kerberos: { enabled: boolean; keytab: string; realm: string; defaultNodeGroup: string };
  /** ACME for the web port's certificate (see server/acme/acme.ts). */
  acme: {
    enabled: boolean;
    directoryUrl: string;
    contact: string[];
    hostnames: string[];
    eabKid: string;
    eabHmacKey: string;
    caFile: string;
    httpPort: number;
    checkIntervalMinutes: number;
  };
  /** LDAP directory login (see server/auth/ldap.ts); `url` empty = off. */
  ldap: {
    url: string;
    startTls: boolean;
    caFile: string;
    bindDn: string;
    bindPassword: string;
    userBase: string;
    userFilter: string;
    usernameAttribute: string;
    nameAttribute: string;
    emailAttribute: string;
    groupBase: string;
    groupFilter: string;
    groupNameAttribute: string;
    groupMap: string[];
    timeoutSeconds: number;
  };
  /** Flatpak catalogue: refresh schedule and outbound fetch limits (private targets only when allowed). */
  flatpak: { catalogRefreshMinutes: number; catalogAllowPrivateTargets: boolean; catalogMaxBytes: number };
}

/** A configuration problem a person must fix; the message names the key. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

type Kind = "string" | "port" | "int" | "bool" | "list" | "hostport";

interface KeySpec {
  /** Dotted YAML key. */
  key: string;
  kind: Kind;
  default: string | number | boolean | string[];
  /** Environment variable when it is not the derived `SVC_*` name. */
  env?: string;
  /** Extra check; returns a problem description or undefined. */
  check?: (value: unknown) => string | undefined;
  min?: number;
  max?: number;
  oneOf?: string[];
}

/** Every configuration key svc-server understands. */
export const CONFIG_KEYS: readonly KeySpec[] = [
  { key: "server.address", kind: "string", default: "" },
  { key: "server.enrollment_port", kind: "port", default: 8443 },
  { key: "server.policy_port", kind: "port", default: 8444 },
  { key: "server.hostnames", kind: "list", default: [] },
  { key: "server.data_dir", kind: "string", default: "/var/lib/svc" },
  { key: "server.trusted_proxies", kind: "list", default: [] },
  { key: "server.replica_timeout_seconds", kind: "int", default: 30, min: 3, max: 3600 },
  { key: "server.policy_workers", kind: "int", default: 0, min: 0, max: 256 },
  { key: "database.url", kind: "string", default: "", check: checkDatabaseUrl },
  { key: "database.pool_size", kind: "int", default: 20, min: 2, max: 1000 },
  { key: "tls.cert_file", kind: "string", default: "" },
  { key: "tls.key_file", kind: "string", default: "" },
  { key: "ca.cert_file", kind: "string", default: "" },
  { key: "ca.key_file", kind: "string", default: "" },
  { key: "ca.key_encryption_key_file", kind: "string", default: "" },
  { key: "ca.key_type", kind: "string", default: DEFAULT_CA_KEY_TYPE, oneOf: [...CA_KEY_TYPES] },
  { key: "security.admin_token", kind: "string", default: "", check: checkAdminToken },
  { key: "security.admin_password", kind: "string", default: "", env: "SVC_ADMIN_PASSWORD" },
  { key: "security.jwt_secret", kind: "string", default: "", env: "JWT_SECRET", check: checkJwtSecret },
  { key: "security.access_token_ttl_seconds", kind: "int", default: 900, min: 5, max: 86400 },
  { key: "security.refresh_token_ttl_seconds", kind: "int", default: 86400, min: 60, max: 30 * 86400 },
  { key: "metrics.listen_addr", kind: "hostport", default: "127.0.0.1:9090", env: "SVC_METRICS_ADDR" },
  { key: "metrics.bearer_token", kind: "string", default: "", env: "SVC_METRICS_TOKEN" },
  { key: "metrics.tls_cert_file", kind: "string", default: "", env: "SVC_METRICS_TLS_CERT_FILE" },
  { key: "metrics.tls_key_file", kind: "string", default: "", env: "SVC_METRICS_TLS_KEY_FILE" },
  { key: "audit.retention_days", kind: "int", default: 90, min: 0, max: 36500 },
  { key: "audit.syslog.enabled", kind: "bool", default: false },
  { key: "audit.syslog.network", kind: "string", default: "udp", oneOf: ["udp", "tcp", "tcp+tls"] },
  { key: "audit.syslog.addr", kind: "hostport", default: "localhost:514" },
  { key: "audit.syslog.format", kind: "string", default: "cef", oneOf: ["cef", "ocsf"] },
  { key: "audit.syslog.facility", kind: "int", default: 16, min: 0, max: 23 },
  { key: "audit.syslog.tls_ca_file", kind: "string", default: "" },
  { key: "agent_repo.dir", kind: "string", default: "/usr/share/svc/agent-repo" },
  { key: "events.max_streams", kind: "int", default: 1000, min: 0, max: 1_000_000 },
  { key: "events.max_streams_per_user", kind: "int", default: 16, min: 0, max: 10_000 },
  { key: "events.heartbeat_seconds", kind: "int", default: 15, min: 1, max: 300 },
  { key: "trends.hourly_retention_days", kind: "int", default: 14, min: 1, max: 366 },
  { key: "trends.daily_retention_days", kind: "int", default: 400, min: 1, max: 36500 },
  { key: "log.level", kind: "string", default: "info", oneOf: ["debug", "info", "warn", "error"] },
  { key: "log.format", kind: "string", default: "text", oneOf: ["text", "json"] },
  { key: "disk_encryption.kek_file", kind: "string", default: "" },
  { key: "disk_encryption.create_kek_file", kind: "bool", default: false },
  { key: "kerberos.enabled", kind: "bool", default: false },
  { key: "kerberos.keytab", kind: "string", default: "/etc/svc/http.keytab" },
  { key: "kerberos.realm", kind: "string", default: "" },
  { key: "kerberos.default_node_group", kind: "string", default: "" },
  { key: "acme.enabled", kind: "bool", default: false },
  { key: "acme.directory_url", kind: "string", default: "" },
  { key: "acme.contact", kind: "list", default: [] },
  { key: "acme.hostnames", kind: "list", default: [] },
  { key: "acme.eab_kid", kind: "string", default: "" },
  { key: "acme.eab_hmac_key", kind: "string", default: "" },
  { key: "acme.ca_file", kind: "string", default: "" },
  { key: "acme.http_port", kind: "port", default: 80 },
  { key: "acme.check_interval_minutes", kind: "int", default: 60, min: 1, max: 1440 },
  { key: "ldap.url", kind: "string", default: "", check: checkLdapUrl },
  { key: "ldap.start_tls", kind: "bool", default: true },
  { key: "ldap.ca_file", kind: "string", default: "" },
  { key: "ldap.bind_dn", kind: "string", default: "" },
  { key: "ldap.bind_password", kind: "string", default: "" },
  { key: "ldap.user_base", kind: "string", default: "" },
  { key: "ldap.user_filter", kind: "string", default: "(&(objectClass=inetOrgPerson)(uid={username}))" },
  { key: "ldap.username_attribute", kind: "string", default: "uid" },
  { key: "ldap.name_attribute", kind: "string", default: "cn" },
  { key: "ldap.email_attribute", kind: "string", default: "mail" },
  { key: "ldap.group_base", kind: "string", default: "" },
  { key: "ldap.group_filter", kind: "string", default: "(member={dn})" },
  { key: "ldap.group_name_attribute", kind: "string", default: "cn" },
  { key: "ldap.group_map", kind: "list", default: [] },
  { key: "ldap.timeout_seconds", kind: "int", default: 10, min: 1, max: 120 },
  { key: "flatpak.catalog_refresh_minutes", kind: "int", default: 360, min: 0, max: 10080 },
  { key: "flatpak.catalog_allow_private_targets", kind: "bool", default: false },
  {
    key: "flatpak.catalog_max_bytes",
    kind: "int",
    default: 64 * 1024 * 1024,
    min: 1024,
    max: 1024 * 1024 * 1024,
  },
];

/** Pairs that must be set together or both left empty. */
const PAIRS: ReadonlyArray<[string, string]> = [
  ["tls.cert_file", "tls.key_file"],
  ["ca.cert_file", "ca.key_file"],
  ["metrics.tls_cert_file", "metrics.tls_key_file"],
];

/** Environment variable name for a dotted key. */
export function envNameFor(spec: { key: string; env?: string }): string {
  return spec.env ?? "SVC_" + spec.key.toUpperCase().replaceAll(".", "_");
}

/** Options for {@link loadConfig}. */
export interface LoadConfigOptions {
  /** Path of the YAML file; a missing file is an error only when the path was given explicitly. */
  path?: string;
  explicitPath?: boolean;
  /** Environment to read (defaults to `Deno.env.toObject()`). */
  env?: Record<string, string>;
  /** Values applied after defaults but before the file (used by `deno task start` for a local data dir). */
  overrides?: Record<string, unknown>;
}

/** Loads and validates the configuration; throws {@link ConfigError} naming the first bad key. */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<ServerConfig> {
  const path = options.path ?? "/etc/svc/server.yaml";
  let fileValues: Record<string, unknown> = {};
  let text: string | undefined;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound) || options.explicitPath) {
      throw new ConfigError(`cannot read configuration file ${path}: ${(err as Error).message}`);
    }
  }
  if (text !== undefined) fileValues = flattenYaml(text, path);
  return resolveConfig(fileValues, options.env ?? Deno.env.toObject(), options.overrides ?? {});
}

/** Builds a config from already-flattened file values and an environment (no I/O; used by tests too). */
export function resolveConfig(
  fileValues: Record<string, unknown>,
  env: Record<string, string>,
  overrides: Record<string, unknown> = {},
): ServerConfig {
  const known = new Set(CONFIG_KEYS.map((k) => k.key));
  for (const key of Object.keys(fileValues)) {
    if (!known.has(key)) {
      throw new ConfigError(
        `unknown configuration key "${key}": check its spelling against packaging/server.yaml`,
      );
    }
  }
  const values = new Map<string, unknown>();
  for (const spec of CONFIG_KEYS) {
    let value: unknown = spec.default;
    let source = "default";
    if (spec.key in overrides) [value, source] = [overrides[spec.key], "default"];
    if (spec.key in fileValues && fileValues[spec.key] !== null) {
      [value, source] = [fileValues[spec.key], "file"];
    }
    const envName = envNameFor(spec);
    const envValue = env[envName];
    if (envValue !== undefined && envValue !== "") [value, source] = [envValue, "env"];
    values.set(spec.key, coerce(spec, value, source === "env" ? envName : spec.key));
  }
  for (const [a, b] of PAIRS) {
    const hasA = values.get(a) !== "";
    const hasB = values.get(b) !== "";
    if (hasA !== hasB) {
      throw new ConfigError(
        `${a} and ${b}: both must be set or neither (${hasA ? a : b} is set, ${hasA ? b : a} is empty)`,
      );
    }
  }
  const v = <T>(key: string) => values.get(key) as T;
  return {
    server: {
      address: v("server.address"),
      enrollmentPort: v("server.enrollment_port"),
      policyPort: v("server.policy_port"),
      hostnames: v("server.hostnames"),
      dataDir: v("server.data_dir"),
      trustedProxies: v("server.trusted_proxies"),
      replicaTimeoutSeconds: v("server.replica_timeout_seconds"),
      policyWorkers: policyWorkers(v("server.policy_workers"), v("database.url")),
    },
    database: { url: v("database.url"), poolSize: v("database.pool_size") },
    tls: { certFile: v("tls.cert_file"), keyFile: v("tls.key_file") },
    ca: {
      certFile: v("ca.cert_file"),
      keyFile: v("ca.key_file"),
      keyEncryptionKeyFile: v("ca.key_encryption_key_file"),
      keyType: v("ca.key_type") as CaKeyType,
    },
    security: {
      adminToken: v("security.admin_token"),
      adminPassword: v("security.admin_password"),
      jwtSecret: v("security.jwt_secret"),
      accessTokenTtlSeconds: v("security.access_token_ttl_seconds"),
      refreshTokenTtlSeconds: v("security.refresh_token_ttl_seconds"),
    },
    metrics: {
      listenAddr: v("metrics.listen_addr"),
      bearerToken: v("metrics.bearer_token"),
      tlsCertFile: v("metrics.tls_cert_file"),
      tlsKeyFile: v("metrics.tls_key_file"),
    },
    audit: {
      retentionDays: v("audit.retention_days"),
      syslog: {
        enabled: v("audit.syslog.enabled"),
        network: v("audit.syslog.network"),
        addr: v("audit.syslog.addr"),
        format: v("audit.syslog.format"),
        facility: v("audit.syslog.facility"),
        tlsCaFile: v("audit.syslog.tls_ca_file"),
      },
    },
    agentRepo: { dir: v("agent_repo.dir") },
    events: {
      maxStreams: v("events.max_streams"),
      maxStreamsPerUser: v("events.max_streams_per_user"),
      heartbeatSeconds: v("events.heartbeat_seconds"),
    },
    trends: trendRetention(v("trends.hourly_retention_days"), v("trends.daily_retention_days")),
    log: { level: v("log.level"), format: v("log.format") },
    diskEncryption: {
      // Creating a KEK without naming a file (dev mode) keeps it with the rest of the server's state.
      kekFile: v<string>("disk_encryption.kek_file") ||
        (v<boolean>("disk_encryption.create_kek_file")
          ? `${v<string>("server.data_dir")}/disk-encryption.kek`
          : ""),
      createKekFile: v("disk_encryption.create_kek_file"),
    },
    kerberos: {
      enabled: v("kerberos.enabled"),
      keytab: v("kerberos.keytab"),
      realm: v("kerberos.realm"),
      defaultNodeGroup: v("kerberos.default_node_group"),
    },
    acme: {
      enabled: v("acme.enabled"),
      directoryUrl: v("acme.directory_url"),
      contact: v("acme.contact"),
      hostnames: v("acme.hostnames"),
      eabKid: v("acme.eab_kid"),
      eabHmacKey: v("acme.eab_hmac_key"),
      caFile: v("acme.ca_file"),
      httpPort: v("acme.http_port"),
      checkIntervalMinutes: v("acme.check_interval_minutes"),
    },
    ldap: {
      url: v("ldap.url"),
      startTls: v("ldap.start_tls"),
      caFile: v("ldap.ca_file"),
      bindDn: v("ldap.bind_dn"),
      bindPassword: v("ldap.bind_password"),
      userBase: v("ldap.user_base"),
      userFilter: v("ldap.user_filter"),
      usernameAttribute: v("ldap.username_attribute"),
      nameAttribute: v("ldap.name_attribute"),
      emailAttribute: v("ldap.email_attribute"),
      groupBase: v("ldap.group_base"),
      groupFilter: v("ldap.group_filter"),
      groupNameAttribute: v("ldap.group_name_attribute"),
      groupMap: v("ldap.group_map"),
      timeoutSeconds: v("ldap.timeout_seconds"),
    },
    flatpak: {
      catalogRefreshMinutes: v("flatpak.catalog_refresh_minutes"),
      catalogAllowPrivateTargets: v("flatpak.catalog_allow_private_targets"),
      catalogMaxBytes: v("flatpak.catalog_max_bytes"),
    },
  };
}

/** `ldap.url`: empty, or `ldap://` / `ldaps://` with a host. */
function checkLdapUrl(value: unknown): string | undefined {
  const url = String(value);
  if (url === "" || /^ldaps?:\/\/[^/\s]+\/?$/.test(url)) return undefined;
  return "is not an LDAP URL; use ldap://host[:port] (with StartTLS) or ldaps://host[:port]";
}

/** Turns a nested YAML document into dotted keys (`server: {policy_port: 1}` → `server.policy_port`). */
function flattenYaml(text: string, path: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`configuration file ${path} is not valid YAML: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new ConfigError(
      `configuration file ${path} must be a YAML mapping of sections (server:, database:, …)`,
    );
  }
  const out: Record<string, unknown> = {};
  const known = new Set(CONFIG_KEYS.map((k) => k.key));
  const walk = (prefix: string, node: Record<string, unknown>) => {
    for (const [k, value] of Object.entries(node)) {
      const key = prefix ? `${prefix}.${k}` : k;
      if (!known.has(key) && value !== null && typeof value === "object" && !Array.isArray(value)) {
        walk(key, value as Record<string, unknown>);
      } else {
        out[key] = value;
      }
    }
  };
  walk("", doc as Record<string, unknown>);
  return out;
}

function coerce(spec: KeySpec, raw: unknown, name: string): unknown {
  const fail = (what: string): never => {
    throw new ConfigError(`${name}: ${what}`);
  };
  let value: unknown;
  switch (spec.kind) {
    case "string":
    case "hostport":
      if (typeof raw !== "string" && typeof raw !== "number") fail(`expected a string, got ${describe(raw)}`);
      value = String(raw).trim();
      if (
        spec.kind === "hostport" && !/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]*):\d{1,5}$/.test(value as string)
      ) {
        fail(`"${value}" is not host:port (for example 127.0.0.1:9090)`);
      }
      if (spec.kind === "hostport") {
        const port = Number((value as string).slice((value as string).lastIndexOf(":") + 1));
        if (port < 1 || port > 65535) fail(`port ${port} is outside 1-65535`);
      }
      break;
    case "port":
    case "int": {
      const n = typeof raw === "number" ? raw : /^-?\d+$/.test(String(raw).trim()) ? Number(raw) : NaN;
      if (!Number.isInteger(n)) fail(`"${raw}" is not a whole number`);
      const min = spec.kind === "port" ? 1 : spec.min;
      const max = spec.kind === "port" ? 65535 : spec.max;
      if (min !== undefined && n < min) fail(`${n} is below the minimum ${min}`);
      if (max !== undefined && n > max) fail(`${n} is above the maximum ${max}`);
      value = n;
      break;
    }
    case "bool": {
      if (typeof raw === "boolean") value = raw;
      else {
        const s = String(raw).trim().toLowerCase();
        if (["true", "1", "yes", "on"].includes(s)) value = true;
        else if (["false", "0", "no", "off"].includes(s)) value = false;
        else fail(`"${raw}" is not a boolean (use true or false)`);
      }
      break;
    }
    case "list": {
      if (Array.isArray(raw)) value = raw.map((x) => String(x).trim()).filter((x) => x !== "");
      else if (typeof raw === "string") value = raw.split(",").map((x) => x.trim()).filter((x) => x !== "");
      else fail(`expected a list (YAML sequence or comma-separated string), got ${describe(raw)}`);
      break;
    }
  }
  if (spec.oneOf && !spec.oneOf.includes(value as string)) {
    fail(`"${value}" is not one of ${spec.oneOf.join(", ")}`);
  }
  const problem = spec.check?.(value);
  if (problem) fail(problem);
  return value;
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return "a list";
  if (value === null) return "null";
  return typeof value === "object" ? "a mapping" : `${typeof value} ${JSON.stringify(value)}`;
}

/**
 * `server.policy_workers`: 0 (the default) means one per CPU on PostgreSQL and 1 on the embedded database,
 * which lives in one process and cannot be shared by several.
 */
function policyWorkers(configured: number, databaseUrl: string): number {
  if (databaseUrl === "") {
    if (configured > 1) {
      throw new ConfigError(
        `server.policy_workers is ${configured}, but the embedded database (database.url empty) can only be ` +
          "used by one process: set server.policy_workers to 1, or set database.url to a PostgreSQL database",
      );
    }
    return 1;
  }
  return configured > 0 ? configured : Math.max(1, navigator.hardwareConcurrency || 1);
}

/**
 * The trend retentions: a day's point is rolled from the hourly samples of that day, so the daily chart must
 * reach at least as far back as the hourly one.
 */
function trendRetention(hourly: number, daily: number): ServerConfig["trends"] {
  if (daily < hourly) {
    throw new ConfigError(
      `trends.daily_retention_days (${daily}) is shorter than trends.hourly_retention_days (${hourly}): ` +
        "daily points summarise the hourly ones and must be kept at least as long; raise " +
        "trends.daily_retention_days or lower trends.hourly_retention_days",
    );
  }
  return { hourlyRetentionDays: hourly, dailyRetentionDays: daily };
}

function checkDatabaseUrl(value: unknown): string | undefined {
  const s = value as string;
  if (s === "") return undefined;
  if (!/^postgres(ql)?:\/\//.test(s)) {
    return "must be a postgres:// or postgresql:// URL (leave empty for the embedded database)";
  }
  return undefined;
}

function checkJwtSecret(value: unknown): string | undefined {
  const s = value as string;
  if (s !== "" && new TextEncoder().encode(s).length < 32) {
    return "must be at least 32 bytes long (generate one with: openssl rand -hex 32)";
  }
  return undefined;
}

function checkAdminToken(value: unknown): string | undefined {
  const s = value as string;
  if (s !== "" && s.length < 24) {
    return "must be at least 24 characters (generate one with: openssl rand -hex 24)";
  }
  return undefined;
}
