/**
 * The README's configuration table, generated from {@link CONFIG_KEYS} (names, environment variables and
 * defaults) plus one line of meaning per key, so the table can never miss a key or show a stale default.
 * `deno task docs:config` rewrites the table between its markers; `tests/server/config_table_test.ts`
 * fails when the README and the key list disagree.
 */
import { CONFIG_KEYS, envNameFor } from "./config.ts";

/** What each key means, and how its default reads when the raw default would mislead. */
export const CONFIG_DOCS: Record<string, { meaning: string; default?: string }> = {
  "server.address": { meaning: "Interface to bind", default: "empty (all)" },
  "server.enrollment_port": { meaning: "Web port: UI, REST, `/agent/`, enrollment gRPC" },
  "server.policy_port": { meaning: "Policy gRPC port (agents, mTLS)" },
  "server.hostnames": {
    meaning: "Names in the generated server certificates (comma list in the environment)",
  },
  "server.data_dir": {
    meaning: "Embedded DB, CA, certificates",
    default: "`/var/lib/svc` (`.svc-data` with `--dev`)",
  },
  "server.trusted_proxies": { meaning: "Proxies whose `X-Forwarded-For` is believed" },
  "server.replica_timeout_seconds": {
    meaning: "A replica silent this long is dead; the others mark its agents offline",
  },
  "server.policy_workers": {
    meaning: "Processes serving the policy port (PostgreSQL only; more than 1 shares the port)",
    default: "CPUs on PostgreSQL, 1 embedded",
  },
  "database.url": { meaning: "PostgreSQL URL", default: "empty = embedded" },
  "database.pool_size": {
    meaning: "PostgreSQL connections per server process (main and each policy worker), half for transactions",
  },
  "tls.cert_file": { meaning: "Web-port certificate (with `tls.key_file`)", default: "generated" },
  "tls.key_file": { meaning: "Web-port private key (with `tls.cert_file`)", default: "generated" },
  "ca.cert_file": {
    meaning: "Internal CA certificate, or an intermediate's chain up to the root (with `ca.key_file`)",
    default: "kept in the database",
  },
  "ca.key_file": {
    meaning: "Internal CA private key, or a `pkcs11:` URI of a key on a token (with `ca.cert_file`)",
    default: "kept in the database",
  },
  "ca.key_encryption_key_file": {
    meaning:
      "Key file sealing the CA key, session secret and TOTP key kept in the database; same file on every replica",
    default: "`{data_dir}/pki/secrets.kek`, created on first start",
  },
  "ca.key_type": {
    meaning: "Curve of the internal CA when the server creates it; an existing CA keeps its own",
  },
  "security.admin_token": { meaning: "`x-admin-token` for `CreateEnrollmentToken`", default: "empty = off" },
  "security.admin_password": {
    meaning: "Initial Super Admin password",
    default: "generated, shown at first start",
  },
  "security.jwt_secret": {
    meaning: "Session signing secret, ≥ 32 bytes",
    default: "generated once, kept sealed in the database",
  },
  "security.access_token_ttl_seconds": { meaning: "Session lifetime" },
  "security.refresh_token_ttl_seconds": { meaning: "Refresh lifetime" },
  "metrics.listen_addr": { meaning: "Metrics listener" },
  "metrics.bearer_token": { meaning: "Required bearer token for scrapes" },
  "metrics.tls_cert_file": {
    meaning: "HTTPS for metrics (with `metrics.tls_key_file`)",
    default: "plain HTTP",
  },
  "metrics.tls_key_file": {
    meaning: "HTTPS key for metrics (with `metrics.tls_cert_file`)",
    default: "plain HTTP",
  },
  "audit.retention_days": { meaning: "Purge audit rows older than this (0 = keep)" },
  "audit.syslog.enabled": { meaning: "Forward audit events to syslog" },
  "audit.syslog.network": { meaning: "Syslog transport" },
  "audit.syslog.addr": { meaning: "Syslog receiver" },
  "audit.syslog.format": { meaning: "Event format" },
  "audit.syslog.facility": { meaning: "Syslog facility number" },
  "audit.syslog.tls_ca_file": { meaning: "CA of the receiver for `tcp+tls`", default: "system trust" },
  "agent_repo.dir": {
    meaning: "Served agent package repository",
    default: "`/usr/share/svc/agent-repo` (`dist/agent-repo` with `--dev` when built)",
  },
  "events.max_streams": {
    meaning: "Console live-event streams this process serves at most (0 = none; consoles then poll)",
  },
  "events.max_streams_per_user": { meaning: "Live-event streams one user may hold open (one per tab)" },
  "trends.hourly_retention_days": {
    meaning: "Keep the hourly trend points (fleet compliance, node status, rollouts) this many days",
  },
  "trends.daily_retention_days": {
    meaning: "Keep the daily trend points this many days (at least the hourly retention)",
  },
  "events.heartbeat_seconds": {
    meaning: "Live-event keep-alive comment and session re-check interval (ends streams of ended sessions)",
  },
  "kerberos.enabled": { meaning: "Accept KerberosEnroll (SPNEGO from the machine keytab)" },
  "kerberos.keytab": { meaning: "Keytab with the server's `HTTP/<hostname>` key" },
  "kerberos.realm": {
    meaning: "Realm of the machine principals (`host/<fqdn>@REALM`)",
    default: "empty (required when enabled)",
  },
  "kerberos.default_node_group": {
    meaning: "Node group Kerberos-enrolled machines join",
    default: "empty (required when enabled)",
  },
  "acme.enabled": { meaning: "Obtain and renew the web-port certificate over ACME (policy port unchanged)" },
  "acme.directory_url": { meaning: "ACME directory URL", default: "empty (required when enabled)" },
  "acme.contact": { meaning: "Account contact e-mail addresses" },
  "acme.hostnames": { meaning: "Names on the ACME certificate", default: "`server.hostnames`" },
  "acme.eab_kid": { meaning: "External account binding key id (with `acme.eab_hmac_key`)", default: "none" },
  "acme.eab_hmac_key": { meaning: "External account binding HMAC key, base64url", default: "none" },
  "acme.ca_file": { meaning: "CA file trusted for the ACME directory's TLS", default: "system trust" },
  "acme.http_port": { meaning: "Port answering HTTP-01 challenges" },
  "ldap.url": {
    meaning: "Directory for LDAP login: `ldap://host` (StartTLS) or `ldaps://host`",
    default: "empty = off",
  },
  "ldap.start_tls": { meaning: "Upgrade `ldap://` with StartTLS (turn off only on a trusted loopback)" },
  "ldap.ca_file": {
    meaning: "CA certificate(s) the directory's certificate must chain to",
    default: "system trust store",
  },
  "ldap.bind_dn": { meaning: "Service account DN used to search for users", default: "anonymous search" },
  "ldap.bind_password": { meaning: "Its password (prefer the environment `SVC_LDAP_BIND_PASSWORD`)" },
  "ldap.user_base": { meaning: "Base DN of the user search" },
  "ldap.user_filter": { meaning: "Search filter; `{username}` is replaced, escaped per RFC 4515" },
  "ldap.username_attribute": { meaning: "Attribute holding the svc username" },
  "ldap.name_attribute": { meaning: "Attribute holding the full name" },
  "ldap.email_attribute": { meaning: "Attribute holding the e-mail address" },
  "ldap.group_base": { meaning: "Base DN of the group search", default: "empty = no group sync" },
  "ldap.group_filter": { meaning: "Groups of a user; `{dn}` is the user's DN, escaped" },
  "ldap.group_name_attribute": { meaning: "Attribute naming a group" },
  "ldap.group_map": {
    meaning: "`directory group name or DN=>svc user group` pairs, synced at each login",
    default: "none",
  },
  "ldap.timeout_seconds": { meaning: "Connect and operation timeout" },
  "acme.check_interval_minutes": { meaning: "How often renewal (two thirds of the lifetime) is checked" },
  "log.level": { meaning: "Least severe level logged" },
  "log.format": { meaning: "Log line format: `text` or `json` (one object per line)" },
  "disk_encryption.kek_file": {
    meaning: "Key-encryption key of escrowed recovery keys (0600)",
    default: "empty (`{data_dir}/disk-encryption.kek` with `--dev`)",
  },
  "disk_encryption.create_kek_file": {
    meaning: "Create `kek_file` when missing (development)",
    default: "false (true with `--dev`)",
  },
  "flatpak.catalog_refresh_minutes": {
    meaning: "Refresh period of the Flatpak catalogue (0 = only by hand)",
  },
  "flatpak.catalog_allow_private_targets": {
    meaning: "Let catalogue fetches reach private and loopback addresses",
  },
  "flatpak.catalog_max_bytes": { meaning: "Largest catalogue download" },
};

/** Where the generated table sits in the README. */
export const TABLE_START = "<!-- config-table:start (generated by deno task docs:config) -->";
/** End marker of the generated table. */
export const TABLE_END = "<!-- config-table:end -->";

function defaultText(spec: (typeof CONFIG_KEYS)[number]): string {
  const doc = CONFIG_DOCS[spec.key];
  if (doc?.default) return doc.default;
  const d = spec.default;
  if (Array.isArray(d)) return d.length ? d.join(", ") : "none";
  if (d === "") return "empty";
  return typeof d === "string" ? `\`${d}\`` : String(d);
}

function allowed(spec: (typeof CONFIG_KEYS)[number]): string {
  if (spec.oneOf) return ` (${spec.oneOf.join(", ")})`;
  if (spec.min !== undefined && spec.max !== undefined) return ` (${spec.min}–${spec.max})`;
  return "";
}

/** Keys of {@link CONFIG_KEYS} without a line in {@link CONFIG_DOCS}, and doc lines for unknown keys. */
export function undocumentedKeys(): { missing: string[]; stale: string[] } {
  const keys = new Set(CONFIG_KEYS.map((k) => k.key));
  return {
    missing: [...keys].filter((k) => !CONFIG_DOCS[k]),
    stale: Object.keys(CONFIG_DOCS).filter((k) => !keys.has(k)),
  };
}

/** The Markdown table, one row per key, in declaration order. */
export function renderConfigTable(): string {
  const rows = CONFIG_KEYS.map((spec) => [
    `\`${spec.key}\``,
    `\`${envNameFor(spec)}\``,
    defaultText(spec),
    `${CONFIG_DOCS[spec.key]?.meaning ?? "(undocumented)"}${allowed(spec)}`,
  ]);
  const header = ["Key", "Environment", "Default", "Meaning"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  return [line(header), `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`, ...rows.map(line)].join("\n");
}

/** The README text with the table between the markers replaced. */
export function withConfigTable(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) {
    throw new Error(`README.md needs the markers ${TABLE_START} and ${TABLE_END}`);
  }
  return `${readme.slice(0, start + TABLE_START.length)}\n\n${renderConfigTable()}\n\n${readme.slice(end)}`;
}

if (import.meta.main) {
  const { missing, stale } = undocumentedKeys();
  if (missing.length || stale.length) {
    console.error(
      `config_table: describe every key in CONFIG_DOCS (missing: ${missing.join(", ") || "none"}; ` +
        `unknown: ${stale.join(", ") || "none"})`,
    );
    Deno.exit(1);
  }
  const path = new URL("../../README.md", import.meta.url);
  await Deno.writeTextFile(path, withConfigTable(await Deno.readTextFile(path)));
  console.log("README.md: configuration table regenerated");
}
