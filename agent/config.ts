/**
 * svc-agent configuration: a YAML file (default `/etc/svc/agent.yaml`, expected mode 0600) over
 * built-in defaults. Every key is declared once in {@linkcode AGENT_CONFIG_KEYS}; a bad value
 * stops the agent with a message naming the key and the fix.
 *
 * @module
 */

import { parse as parseYaml } from "yaml";
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from "./log.ts";
import { pathComponents, PathEscapeError } from "./fs.ts";

/** Where the packaged configuration file lives. */
export const DEFAULT_CONFIG_PATH = "/etc/svc/agent.yaml";
/** Where the running agent keeps its status summary unless `agent.status_file` says otherwise. */
export const DEFAULT_STATUS_FILE = "/run/svc-agent/status.json";

/** The whole agent configuration after defaults and the file are merged. */
export interface AgentConfig {
  server: {
    /** Host name or IP of the server, without port; must match its certificate. */
    address: string;
    enrollmentPort: number;
    policyPort: number;
    /** Skip server verification for the enrollment connection only. */
    insecureSkipVerify: boolean;
    /**
     * Seconds without an answer from the server after which the policy connection is given up and made again
     * (keepalive pings with a timeout), so a hung server's agents move to a healthy replica.
     */
    silenceTimeoutSeconds: number;
  };
  agent: {
    /** Node name (certificate Common Name); the host name when empty in the file. */
    clientId: string;
    /** Directory under which every enforced path is resolved. */
    rootDir: string;
    /** Seconds between full re-evaluations of every policy (the safety net of the node watcher). */
    reevaluateIntervalSeconds: number;
    /** Host path of the status summary `svc-agent status` reads (world-readable; no policy content). */
    statusFile: string;
  };
  enrollment: {
    /** Holds `agent.key`, `agent.crt`, `ca.crt` and the agent's state. */
    dataDir: string;
  };
  kerberos: {
    enabled: boolean;
    keytabFile: string;
    servicePrincipal: string;
  };
  firefox: {
    /** System policies file (node path). */
    policiesPath: string;
    /** Flatpak Firefox extension policies file (node path); `{arch}` is replaced. */
    flatpakPoliciesPath: string;
  };
  notifications: {
    /** Local switch; the server's setting (GetAgentConfig) must also allow them. */
    enabled: boolean;
  };
  log: { level: LogLevel; format: LogFormat };
  diskEncryption: {
    /** Node paths of the block devices (or image files) to inventory; empty: every disk lsblk lists. */
    devices: string[];
    /** Directory of unlock secrets the agent may use to add keyslots: `<LUKS UUID>.key`. */
    unlockKeyDir: string;
    /** TPM for TPM2 protectors: `auto`, a device path, or a TCTI such as `swtpm:port=2321`. */
    tpm2Device: string;
  };
}

/** A configuration problem a person must fix; the message names the key. */
export class AgentConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AgentConfigError";
  }
}

type Kind = "string" | "port" | "bool" | "path" | "seconds";

interface KeySpec {
  key: string;
  kind: Kind;
  default: string | number | boolean;
  /** Range of a `seconds` key. */
  range?: readonly [number, number];
  check?: (value: string) => string | undefined;
  oneOf?: readonly string[];
}

const HOST_RE =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const IPV4_RE = /^(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)$/;
const IPV6_RE = /^[0-9A-Fa-f:.]+$/;
/** A node name: it becomes a certificate Common Name and a label in the UI and metrics. */
const NODE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

function checkAddress(value: string): string | undefined {
  if (value === "") return "must not be empty: set the server's host name, e.g. svc.example.com";
  if (HOST_RE.test(value) || IPV4_RE.test(value) || (value.includes(":") && IPV6_RE.test(value))) return;
  return `"${value}" must be a host name or IP address without scheme, port or path (e.g. svc.example.com)`;
}

function checkClientId(value: string): string | undefined {
  if (value === "" || NODE_NAME_RE.test(value)) return;
  return `"${value}" must start with a letter or digit and contain only letters, digits, ".", "_" and "-" (at most 253 characters)`;
}

function checkFlatpakPath(value: string): string | undefined {
  return checkNodePath(value.replaceAll("{arch}", "x86_64"));
}

function checkNodePath(value: string): string | undefined {
  try {
    pathComponents(value);
    return;
  } catch (err) {
    if (err instanceof PathEscapeError) return `must be a plain absolute path: ${err.message}`;
    throw err;
  }
}

/** Every key the agent understands, with its default. */
export const AGENT_CONFIG_KEYS: readonly KeySpec[] = [
  { key: "server.address", kind: "string", default: "localhost", check: checkAddress },
  { key: "server.enrollment_port", kind: "port", default: 8443 },
  { key: "server.policy_port", kind: "port", default: 8444 },
  { key: "server.insecure_skip_verify", kind: "bool", default: false },
  // Keepalive pings may not come more often than every 10 s (the server's limit), so 15 s is the least.
  { key: "server.silence_timeout_seconds", kind: "seconds", default: 20, range: [15, 600] },
  { key: "agent.client_id", kind: "string", default: "", check: checkClientId },
  { key: "agent.root_dir", kind: "path", default: "/" },
  { key: "agent.reevaluate_interval_seconds", kind: "seconds", default: 300, range: [10, 86_400] },
  { key: "agent.status_file", kind: "path", default: DEFAULT_STATUS_FILE },
  { key: "enrollment.data_dir", kind: "path", default: "/var/lib/svc-agent" },
  { key: "kerberos.enabled", kind: "bool", default: false },
  { key: "kerberos.keytab_file", kind: "path", default: "/etc/krb5.keytab" },
  { key: "kerberos.service_principal", kind: "string", default: "" },
  {
    key: "firefox.policies_path",
    kind: "string",
    default: "/etc/firefox/policies/policies.json",
    check: checkNodePath,
  },
  {
    key: "firefox.flatpak_policies_path",
    kind: "string",
    default:
      "/var/lib/flatpak/extension/org.mozilla.firefox.systemconfig/{arch}/stable/policies/policies.json",
    check: checkFlatpakPath,
  },
  { key: "notifications.enabled", kind: "bool", default: true },
  { key: "log.level", kind: "string", default: "info", oneOf: LOG_LEVELS },
  { key: "log.format", kind: "string", default: "text", oneOf: LOG_FORMATS },
  { key: "disk_encryption.devices", kind: "string", default: "", check: checkDeviceList },
  { key: "disk_encryption.unlock_key_dir", kind: "path", default: "/etc/svc/luks-keys" },
  { key: "disk_encryption.tpm2_device", kind: "string", default: "auto", check: checkTpm2Device },
];

function checkDeviceList(value: string): string | undefined {
  for (const device of splitDeviceList(value)) {
    const problem = checkNodePath(device);
    if (problem) return `entry "${device}" ${problem}`;
  }
}

function checkTpm2Device(value: string): string | undefined {
  if (/^[A-Za-z0-9_./:=,+-]{1,256}$/.test(value)) return;
  return `"${value}" must be auto, a device path or a TCTI such as swtpm:port=2321`;
}

function splitDeviceList(value: string): string[] {
  return value.split(",").map((d) => d.trim()).filter((d) => d !== "");
}

/** Options of {@linkcode loadAgentConfig}. */
export interface LoadOptions {
  /**
   * Whether the path was given explicitly (`--config`). A missing explicit file is an error;
   * a missing default file means "all defaults" with a warning.
   */
  explicit?: boolean;
  /** Host name used when `agent.client_id` is empty; default `Deno.hostname()`. */
  hostname?: string;
}

/** A loaded configuration and the warnings a person should see. */
export interface LoadedConfig {
  config: AgentConfig;
  warnings: string[];
}

function lookup(tree: unknown, key: string): unknown {
  let node: unknown = tree;
  for (const part of key.split(".")) {
    if (node === null || typeof node !== "object" || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

function convert(spec: KeySpec, raw: unknown, file: string): string | number | boolean {
  const where = `${spec.key} in ${file}`;
  switch (spec.kind) {
    case "bool":
      if (typeof raw !== "boolean") {
        throw new AgentConfigError(`${where} must be true or false, not ${JSON.stringify(raw)}`);
      }
      return raw;
    case "port":
      if (typeof raw !== "number" || !Number.isInteger(raw) || raw < 1 || raw > 65535) {
        throw new AgentConfigError(
          `${where} must be a port number from 1 to 65535, not ${JSON.stringify(raw)}`,
        );
      }
      return raw;
    case "seconds": {
      const [min, max] = spec.range ?? [1, 86_400];
      if (typeof raw !== "number" || !Number.isInteger(raw) || raw < min || raw > max) {
        throw new AgentConfigError(
          `${where} must be a whole number of seconds from ${min} to ${max}, not ${JSON.stringify(raw)}`,
        );
      }
      return raw;
    }
    case "path":
      if (typeof raw !== "string" || !raw.startsWith("/")) {
        throw new AgentConfigError(`${where} must be an absolute path, not ${JSON.stringify(raw)}`);
      }
      return raw;
    case "string":
      if (typeof raw === "number") return String(raw);
      if (typeof raw !== "string") {
        throw new AgentConfigError(`${where} must be a string, not ${JSON.stringify(raw)}`);
      }
      return raw.trim();
  }
}

function collectKeys(tree: unknown, prefix = ""): string[] {
  if (tree === null || typeof tree !== "object" || Array.isArray(tree)) return prefix ? [prefix] : [];
  return Object.entries(tree as Record<string, unknown>).flatMap(([k, v]) =>
    collectKeys(v, prefix ? `${prefix}.${k}` : k)
  );
}

/**
 * Builds the configuration from parsed YAML (or `undefined` for all defaults). `file` names
 * the source in messages.
 *
 * @throws {AgentConfigError} naming the key and the fix.
 */
export function buildAgentConfig(tree: unknown, file: string, options: LoadOptions = {}): LoadedConfig {
  const warnings: string[] = [];
  if (tree !== undefined && tree !== null && (typeof tree !== "object" || Array.isArray(tree))) {
    throw new AgentConfigError(`${file} must be a YAML mapping of sections (server:, agent:, …)`);
  }
  const known = new Set(AGENT_CONFIG_KEYS.map((k) => k.key));
  for (const key of collectKeys(tree)) {
    if (!known.has(key)) warnings.push(`unknown key "${key}" in ${file} is ignored; check its spelling`);
  }
  const values = new Map<string, string | number | boolean>();
  for (const spec of AGENT_CONFIG_KEYS) {
    const raw = lookup(tree, spec.key);
    const value = raw === undefined || raw === null ? spec.default : convert(spec, raw, file);
    if (typeof value === "string") {
      const problem = spec.check?.(value);
      if (problem) throw new AgentConfigError(`${spec.key} in ${file} ${problem}`);
      if (spec.oneOf && !spec.oneOf.includes(value)) {
        throw new AgentConfigError(
          `${spec.key} in ${file} must be one of ${spec.oneOf.join(", ")}, not "${value}"`,
        );
      }
    }
    values.set(spec.key, value);
  }
  const get = <T>(key: string) => values.get(key) as T;
  let clientId = get<string>("agent.client_id");
  if (clientId === "") {
    clientId = options.hostname ?? Deno.hostname();
    const problem = checkClientId(clientId);
    if (problem) {
      throw new AgentConfigError(
        `agent.client_id is empty and the host name ${problem}; set agent.client_id in ${file}`,
      );
    }
  }
  const config: AgentConfig = {
    server: {
      address: get("server.address"),
      enrollmentPort: get("server.enrollment_port"),
      policyPort: get("server.policy_port"),
      insecureSkipVerify: get("server.insecure_skip_verify"),
      silenceTimeoutSeconds: get("server.silence_timeout_seconds"),
    },
    agent: {
      clientId,
      rootDir: get("agent.root_dir"),
      reevaluateIntervalSeconds: get("agent.reevaluate_interval_seconds"),
      statusFile: get("agent.status_file"),
    },
    enrollment: { dataDir: get("enrollment.data_dir") },
    kerberos: {
      enabled: get("kerberos.enabled"),
      keytabFile: get("kerberos.keytab_file"),
      servicePrincipal: get("kerberos.service_principal"),
    },
    firefox: {
      policiesPath: get("firefox.policies_path"),
      flatpakPoliciesPath: get("firefox.flatpak_policies_path"),
    },
    notifications: { enabled: get("notifications.enabled") },
    log: { level: get("log.level"), format: get("log.format") },
    diskEncryption: {
      devices: splitDeviceList(get("disk_encryption.devices")),
      unlockKeyDir: get("disk_encryption.unlock_key_dir"),
      tpm2Device: get("disk_encryption.tpm2_device"),
    },
  };
  return { config, warnings };
}

/**
 * Reads and validates the configuration file at `path`.
 *
 * @throws {AgentConfigError} when the file is missing (and was named explicitly), unreadable,
 * not YAML, or holds a bad value.
 */
export async function loadAgentConfig(path: string, options: LoadOptions = {}): Promise<LoadedConfig> {
  let text: string;
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound && !options.explicit) {
      const loaded = buildAgentConfig(undefined, path, options);
      loaded.warnings.unshift(`configuration file ${path} does not exist; using built-in defaults`);
      return loaded;
    }
    if (err instanceof Deno.errors.NotFound) {
      throw new AgentConfigError(
        `configuration file ${path} does not exist; create it or pass another --config`,
      );
    }
    throw new AgentConfigError(`cannot read configuration file ${path}: ${(err as Error).message}`);
  }
  let tree: unknown;
  try {
    tree = parseYaml(text);
  } catch (err) {
    throw new AgentConfigError(`configuration file ${path} is not valid YAML: ${(err as Error).message}`);
  }
  const loaded = buildAgentConfig(tree, path, options);
  const mode = (info.mode ?? 0) & 0o777;
  if ((mode & 0o077) !== 0) {
    loaded.warnings.unshift(
      `configuration file ${path} has mode 0${mode.toString(8)}; it should be 0600 (run: chmod 600 ${path})`,
    );
  }
  return loaded;
}

/** The Flatpak architecture name of this machine (`x86_64`, `aarch64`), as in Flatpak paths. */
export function flatpakArch(): string {
  return Deno.build.arch;
}
