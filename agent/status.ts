/**
 * What the agent applied, for the person at the node (`svc-agent status`, the helpdesk's first tool): the
 * daemon keeps a summary in `agent.status_file` (default `/run/svc-agent/status.json`, mode 0644, so no root
 * is needed to read it) with the connection, the last sync and evaluation, each policy with its version and
 * compliance, every setting's result and why it is not applied, and the managed files. It holds no policy
 * content and no key material, only names, versions and results. A Scripts result's words carry the script's
 * output (what the server's compliance report shows the admin), which may name anything the script printed: the
 * file any local user can read keeps only the result's first words, up to the output.
 *
 * @module
 */

import { writeFileAtomic } from "./fs.ts";
import type { Logger } from "./log.ts";
import type { SyncSummary } from "./sync/engine.ts";
import type { ComplianceStatusName } from "./sync/types.ts";
import { scriptsType } from "../shared/policy_types/scripts.ts";

/**
 * Where a Scripts result's message turns into the script's output (agent/enforcers/scripts.ts words them
 * "…; output: <lines>" and "… failed: exit <code>: <lines>").
 */
const OUTPUT_START = /; output: |(?<=exit -?\d+): /;

/** A message fit for the world-readable file: a Scripts result loses the script's output. */
export function publicMessage(type: string, message: string): string {
  if (type !== scriptsType.wireName) return message;
  const cut = OUTPUT_START.exec(message);
  return cut ? `${message.slice(0, cut.index)} (output withheld here; the console shows it)` : message;
}

/** Where the policies being enforced came from. */
export type PolicySource = "none" | "server" | "stored";

/** The summary file's content. */
export interface AgentStatus {
  node: string;
  server: string;
  agentVersion: string;
  pid: number;
  startedAt: string;
  connection: {
    state: "connecting" | "connected" | "disconnected";
    since: string;
    lastError?: string;
  };
  /** `stored`: the set received before the last restart, enforced while the server is not reached yet. */
  source: PolicySource;
  /** When the last complete policy set was received from the server. */
  lastSnapshotAt?: string;
  /** When the last sync (an evaluation of every policy) ended, and why it ran. */
  lastEvaluationAt?: string;
  lastEvaluationReason?: string;
  policies: {
    id: string;
    name: string;
    type: string;
    version: number;
    priority: number;
    status: ComplianceStatusName;
    message: string;
    items: { schemaId: string; key: string; status: ComplianceStatusName; message: string }[];
  }[];
  managedFiles: { path: string; type: string }[];
  /** Node paths whose change makes the agent re-evaluate. */
  watching: string[];
}

/** Keeps the status file up to date; every update rewrites it atomically. */
export class StatusFile {
  readonly path: string;
  readonly #logger: Logger;
  readonly #status: AgentStatus;
  #writing: Promise<void> = Promise.resolve();
  #failed = false;

  constructor(path: string, logger: Logger, base: Pick<AgentStatus, "node" | "server" | "agentVersion">) {
    this.path = path;
    this.#logger = logger;
    const now = new Date().toISOString();
    this.#status = {
      ...base,
      pid: Deno.pid,
      startedAt: now,
      connection: { state: "connecting", since: now },
      source: "none",
      policies: [],
      managedFiles: [],
      watching: [],
    };
  }

  /** The connection changed state. */
  connection(state: AgentStatus["connection"]["state"], lastError?: string): Promise<void> {
    if (this.#status.connection.state !== state || lastError) {
      this.#status.connection = { state, since: new Date().toISOString(), lastError };
    }
    return this.#write();
  }

  /** Policies came from `source`. */
  source(source: PolicySource): Promise<void> {
    this.#status.source = source;
    if (source === "server") this.#status.lastSnapshotAt = new Date().toISOString();
    return this.#write();
  }

  /** A sync ended. */
  evaluated(summary: SyncSummary, reason: string, watching: string[]): Promise<void> {
    this.#status.lastEvaluationAt = new Date().toISOString();
    this.#status.lastEvaluationReason = reason;
    this.#status.managedFiles = summary.managed;
    this.#status.watching = watching;
    const byId = new Map(this.#status.policies.map((p) => [p.id, p]));
    for (const { policy, result } of summary.results) {
      byId.set(policy.id, {
        id: policy.id,
        name: policy.name,
        type: policy.type,
        version: policy.version,
        priority: policy.priority,
        status: result.status,
        message: publicMessage(policy.type, result.message),
        items: result.items.map((i) => ({ ...i, message: publicMessage(policy.type, i.message) })),
      });
    }
    this.#status.policies = [...byId.values()];
    return this.#write();
  }

  /** Keeps only the policies in `ids` (after a sync of the whole cache). */
  retain(ids: ReadonlySet<string>): void {
    this.#status.policies = this.#status.policies.filter((p) => ids.has(p.id));
  }

  #write(): Promise<void> {
    const text = JSON.stringify(
      { ...this.#status, policies: [...this.#status.policies].sort((a, b) => a.name.localeCompare(b.name)) },
      null,
      2,
    );
    this.#writing = this.#writing.then(() => writeFileAtomic(this.path, text, { mode: 0o644 })).then(() => {
      this.#failed = false;
    }, (err) => {
      if (!this.#failed) {
        this.#logger.warn("cannot write the status file; `svc-agent status` will be out of date", {
          path: this.path,
          error: (err as Error).message,
        });
      }
      this.#failed = true;
    });
    return this.#writing;
  }
}

const MARK: Record<ComplianceStatusName, string> = {
  COMPLIANT: "ok",
  NON_COMPLIANT: "NOT APPLIED",
  INAPPLICABLE: "n/a",
  ERROR: "ERROR",
  UNKNOWN: "?",
};

function ago(iso: string | undefined, now: Date): string {
  if (!iso) return "never";
  const seconds = Math.max(0, Math.round((now.getTime() - Date.parse(iso)) / 1000));
  const span = seconds < 120
    ? `${seconds} s`
    : seconds < 7200
    ? `${Math.round(seconds / 60)} min`
    : `${Math.round(seconds / 3600)} h`;
  return `${iso} (${span} ago)`;
}

/**
 * The status as text for a person: the connection and source first, then each policy with its settings; a
 * setting that is not in effect says why. `verbose` lists every setting, not only those not in effect.
 */
export function formatStatus(status: AgentStatus, options: { verbose?: boolean; now?: Date } = {}): string {
  const now = options.now ?? new Date();
  const lines: string[] = [];
  const source = status.source === "stored"
    ? "the policy set received before the last restart (the server has not been reached since)"
    : status.source === "server"
    ? "the server"
    : "none yet";
  lines.push(
    `Node:         ${status.node}`,
    `Server:       ${status.server} — ${status.connection.state} since ${status.connection.since}` +
      (status.connection.lastError ? ` (${status.connection.lastError})` : ""),
    `Agent:        ${status.agentVersion}, pid ${status.pid}, started ${status.startedAt}`,
    `Policies from: ${source}`,
    `Last sync:    ${ago(status.lastSnapshotAt, now)}`,
    `Last check:   ${ago(status.lastEvaluationAt, now)}` +
      (status.lastEvaluationReason ? `, ${status.lastEvaluationReason}` : ""),
    "",
  );
  if (status.policies.length === 0) lines.push("No policy applies to this node.");
  for (const policy of status.policies) {
    lines.push(
      `${policy.name} (${policy.type}, version ${policy.version}, priority ${policy.priority}): ` +
        `${policy.status}${policy.message ? ` — ${policy.message}` : ""}`,
    );
    for (const item of policy.items) {
      if (!options.verbose && (item.status === "COMPLIANT" || item.status === "INAPPLICABLE")) continue;
      const where = item.schemaId ? `${item.schemaId} ` : "";
      lines.push(`  [${MARK[item.status]}] ${where}${item.key}${item.message ? `: ${item.message}` : ""}`);
    }
  }
  if (status.managedFiles.length) {
    lines.push("", "Managed files:");
    for (const file of status.managedFiles) lines.push(`  ${file.path} (${file.type})`);
  }
  return lines.join("\n");
}

/** Reads the status file, or explains why it cannot be read. */
export async function readStatus(path: string): Promise<AgentStatus | string> {
  try {
    return JSON.parse(await Deno.readTextFile(path)) as AgentStatus;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      return `no status at ${path}: the agent is not running (start it: systemctl start svc-agent)`;
    }
    return `cannot read the status at ${path}: ${(err as Error).message}`;
  }
}
