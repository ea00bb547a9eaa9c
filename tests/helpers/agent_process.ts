/**
 * Real svc-agent processes for end-to-end tests, and the REST client of a logged-in admin: spawn the agent
 * from source with a config file, follow its output, wait on conditions (never fixed sleeps).
 */
import { stringify } from "yaml";
import type { ServerProcess } from "./process.ts";
import { trustingClient } from "./process.ts";
import { spawnDeno } from "./command.ts";

/** The agent's entry point. */
export const AGENT_MAIN = new URL("../../agent/main.ts", import.meta.url).pathname;

// deno-lint-ignore no-explicit-any
export type Json = any;

/** What calls the REST API as a logged-in admin: {@link Api}, or `Rest` of ./replicas.ts. */
export interface RestCaller {
  call(method: string, path: string, body?: unknown): Promise<Json>;
}

/** REST client with the cookie jar and CSRF double submit of a browser. */
export class Api implements RestCaller {
  readonly #cookies = new Map<string, string>();
  constructor(readonly server: ServerProcess, readonly client: Deno.HttpClient) {}

  static async login(server: ServerProcess): Promise<Api> {
    const api = new Api(server, await trustingClient(server));
    await api.call("POST", "/api/v1/auth/login", {
      username: "admin",
      password: await server.adminPassword(),
    });
    return api;
  }

  async call(method: string, path: string, body?: unknown): Promise<Json> {
    const headers: Record<string, string> = {
      cookie: [...this.#cookies].map(([k, v]) => `${k}=${v}`).join("; "),
    };
    if (body !== undefined) headers["content-type"] = "application/json";
    const csrf = this.#cookies.get("svc_csrf");
    if (csrf && method !== "GET") headers["x-csrf-token"] = csrf;
    const res = await fetch(`${this.server.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      client: this.client,
    });
    for (const cookie of res.headers.getSetCookie()) {
      const [pair] = cookie.split(";");
      const eq = pair.indexOf("=");
      this.#cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path} → ${res.status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  }

  close(): void {
    this.client.close();
  }
}

/** A running agent process with its output. */
export interface AgentProcess {
  output(): string;
  waitForLog(pattern: RegExp, timeoutMs?: number, from?: number): Promise<void>;
  stop(signal?: Deno.Signal): Promise<number>;
}

export function spawnAgent(
  configPath: string,
  env: Record<string, string>,
  args: string[] = [],
): AgentProcess {
  const { child, followed, exitCode, status } = spawnDeno([AGENT_MAIN, "--config", configPath, ...args], env);
  const pumps = followed.closed;
  return {
    output: followed.all,
    async waitForLog(pattern, timeoutMs = 30_000, from = 0) {
      await eventually(
        () => pattern.test(followed.all().slice(from)),
        timeoutMs,
        `agent log ${pattern}`,
        followed.all,
      );
    },
    async stop(signal: Deno.Signal = "SIGTERM") {
      if (exitCode() === undefined) {
        try {
          child.kill(signal);
        } catch { /* gone */ }
        const timer = setTimeout(() => {
          try {
            child.kill("SIGKILL");
          } catch { /* gone */ }
        }, 10_000);
        await status;
        clearTimeout(timer);
      }
      await pumps;
      return exitCode()!;
    },
  };
}

export async function runAgentOnce(configPath: string, env: Record<string, string>, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", AGENT_MAIN, "--config", configPath, ...args],
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

export async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  what: string,
  context?: () => string,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < until) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${lastError}` : ""}` +
      (context ? `\n--- output ---\n${context().slice(-6000)}` : ""),
  );
}

/**
 * An agent's configuration file (0600, as packaged) for `server`: its ports, `localhost` as the address, the
 * node name, root and data directory, the log level (default debug), and `agent` keys added to the agent
 * section; and the environment under which the node trusts the server's CA (verification stays on).
 */
export async function writeAgentConfig(
  path: string,
  server: ServerProcess,
  options: {
    clientId: string;
    root: string;
    dataDir: string;
    agent?: Record<string, unknown>;
    logLevel?: string;
  },
): Promise<Record<string, string>> {
  await Deno.writeTextFile(
    path,
    stringify({
      server: { address: "localhost", enrollment_port: server.webPort, policy_port: server.policyPort },
      agent: { client_id: options.clientId, root_dir: options.root, ...options.agent },
      enrollment: { data_dir: options.dataDir },
      log: { level: options.logLevel ?? "debug" },
    }),
  );
  await Deno.chmod(path, 0o600);
  return { SSL_CERT_FILE: `${server.dataDir}/pki/ca/ca.crt`, SVC_ENROLLMENT_TOKEN: "" };
}

/**
 * Enrolls the agent of `configPath` into a new node group named `groupName`, as an administrator does: a token
 * from REST in `tokenFile`, `svc-agent --token-file` run once (which must succeed). Answers the group's id.
 */
export async function enrollIntoNewGroup(
  api: RestCaller,
  options: { groupName: string; configPath: string; env: Record<string, string>; tokenFile: string },
): Promise<string> {
  const group = await api.call("POST", "/api/v1/node-groups", { name: options.groupName });
  const { token } = await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
  await Deno.writeTextFile(options.tokenFile, token);
  const enrolled = await runAgentOnce(options.configPath, options.env, ["--token-file", options.tokenFile]);
  if (enrolled.code !== 0) {
    throw new Error(`svc-agent enrollment failed (exit ${enrolled.code}): ${enrolled.stderr}`);
  }
  return group.id;
}

/**
 * Creates a policy (Firefox unless `type` says otherwise) with `content` as its JSON, releases it and binds it
 * to a node group at `priority`; the binding is enabled unless `enable` is false. Answers both ids.
 */
export async function bindReleasedPolicy(
  api: RestCaller,
  options: {
    groupId: string;
    name: string;
    type?: string;
    content: Json;
    priority: number;
    enable?: boolean;
  },
): Promise<{ policyId: string; bindingId: string }> {
  const policy = await api.call("POST", "/api/v1/policies/all", {
    name: options.name,
    type: options.type ?? "Firefox",
    content: JSON.stringify(options.content),
  });
  await api.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
  const binding = await api.call("POST", "/api/v1/policy-bindings", {
    policy_id: policy.id,
    node_group_id: options.groupId,
    priority: options.priority,
  });
  if (options.enable !== false) {
    await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
  }
  return { policyId: policy.id, bindingId: binding.id };
}
