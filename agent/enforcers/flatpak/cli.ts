/**
 * The `flatpak` command on the node's system installation, as the Flatpak type drives it: every call gets the
 * enforcer's environment (`FLATPAK_SYSTEM_DIR` moves the installation), installs and updates get the long
 * timeout; the remotes and refs it lists are parsed here.
 *
 * @module
 */

import type { RunResult } from "../../runner.ts";
import type { EnforcerIO } from "../../sync/types.ts";

/** A remote's settings as flatpak lists them (and svc records them when adopting one). */
export interface RemoteSettings {
  url: string;
  priority: string;
  filter: string;
  subset: string;
  title: string;
}

/** One installed ref. */
export interface InstalledRef {
  ref: string;
  kind: string;
  id: string;
  branch: string;
  origin: string;
  commit: string;
}

const CHECKED_COLUMNS = "name,url,priority,filter,subset,title";
const LIST_COLUMNS = "application,arch,branch,origin,active";

/** One value of a `--columns` table; flatpak prints "-" for an unset one. */
function cell(value: string | undefined): string {
  const v = (value ?? "").trim();
  return v === "-" ? "" : v;
}

/** Parses `flatpak remotes --columns=name,url,priority,filter,subset,title`. */
export function parseRemotes(text: string): Map<string, RemoteSettings> {
  const remotes = new Map<string, RemoteSettings>();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const [name, url, priority, filter, subset, title] = line.split("\t");
    if (!cell(name)) continue;
    remotes.set(cell(name), {
      url: cell(url),
      priority: cell(priority),
      filter: cell(filter),
      subset: cell(subset),
      title: cell(title),
    });
  }
  return remotes;
}

/** Parses `flatpak list --app|--runtime --columns=application,arch,branch,origin,active`. */
export function parseInstalled(text: string, kind: "app" | "runtime"): InstalledRef[] {
  const refs: InstalledRef[] = [];
  for (const line of text.split("\n")) {
    const [id, arch, branch, origin, commit] = line.split("\t").map(cell);
    if (!id || !arch || !branch) continue;
    refs.push({ ref: `${kind}/${id}/${arch}/${branch}`, kind, id, branch, origin, commit });
  }
  return refs;
}

/** What a failed flatpak command said, for a message. */
export function errorText(result: RunResult): string {
  const text = (result.stderr.trim() || result.stdout.trim()).split("\n").slice(-3).join(" ");
  return result.timedOut ? "timed out" : text || `exit code ${result.code}`;
}

/** See the module documentation. */
export class FlatpakCli {
  readonly #env?: Record<string, string>;
  readonly #transferTimeoutMs: number;
  #subsets: boolean | undefined;

  constructor(options: { env?: Record<string, string>; transferTimeoutMs: number }) {
    this.#env = options.env;
    this.#transferTimeoutMs = options.transferTimeoutMs;
  }

  /** Runs `flatpak` with `args`. */
  run(io: EnforcerIO, args: string[], timeoutMs = 120_000): Promise<RunResult> {
    return io.runner.run("flatpak", args, { env: this.#env, timeoutMs });
  }

  /** Runs `flatpak` with `args` that download or deploy (install, update, uninstall). */
  transfer(io: EnforcerIO, args: string[]): Promise<RunResult> {
    return this.run(io, args, this.#transferTimeoutMs);
  }

  /** The system installation's remotes. */
  async remotes(io: EnforcerIO): Promise<Map<string, RemoteSettings>> {
    const out = await this.run(io, [
      "--system",
      "remotes",
      "--show-disabled",
      `--columns=${CHECKED_COLUMNS}`,
    ]);
    if (!out.success) throw new Error(`flatpak remotes failed: ${errorText(out)}`);
    return parseRemotes(out.stdout);
  }

  /** Every installed app and runtime of the system installation. */
  async installed(io: EnforcerIO): Promise<InstalledRef[]> {
    const refs: InstalledRef[] = [];
    for (const kind of ["app", "runtime"] as const) {
      const out = await this.run(io, ["--system", "list", `--${kind}`, `--columns=${LIST_COLUMNS}`]);
      if (!out.success) throw new Error(`flatpak list failed: ${errorText(out)}`);
      refs.push(...parseInstalled(out.stdout, kind));
    }
    return refs;
  }

  /** Whether this flatpak knows `--subset` (1.12 and later); asked once. */
  async supportsSubsets(io: EnforcerIO): Promise<boolean> {
    this.#subsets ??= (await this.run(io, ["remote-add", "--help"])).stdout.includes("--subset");
    return this.#subsets;
  }
}
