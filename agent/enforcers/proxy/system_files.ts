/**
 * The Proxy type's plain system files: `/etc/environment` (pam_env), apt's configuration fragment and dnf.conf,
 * each rendered from the winning configuration and read the way its program reads it.
 *
 * `/etc/environment` and dnf.conf belong to the node: svc adds a marked block at the end (of the file, of dnf's
 * `[main]`) and the managed-file store puts the original back on release. apt gets a file of its own.
 *
 * @module
 */

import type { EnforcerIO } from "../../sync/types.ts";

/** Node paths svc writes. */
export const ENVIRONMENT = "/etc/environment";
export const APT_FILE = "/etc/apt/apt.conf.d/80svc-proxy";
export const DNF_CONF = "/etc/dnf/dnf.conf";

const BEGIN = "# BEGIN svc proxy (managed by svc-agent; change the Proxy policy instead)";
const END = "# END svc proxy";
const REPLACED = "# replaced by svc's Proxy policy: ";
const APT_HEADER =
  "// Managed by svc (svc-agent). Local changes are overwritten; change the Proxy policy instead.";

/** `text` without svc's marked block. */
function withoutBlock(text: string): string {
  const lines = text.split("\n");
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END, begin);
  if (begin < 0 || end < 0) return text;
  return [...lines.slice(0, begin), ...lines.slice(end + 1)].join("\n");
}

function block(lines: string[]): string {
  return `${BEGIN}\n${lines.join("\n")}\n${END}\n`;
}

/** `/etc/environment` with svc's block at the end. */
export function environmentFile(current: string | undefined, vars: Map<string, string>): string {
  const rest = withoutBlock(current ?? "");
  const body = rest === "" || rest.endsWith("\n") ? rest : `${rest}\n`;
  return body + block([...vars].map(([k, v]) => `${k}=${v}`));
}

/**
 * The variables of an environment file as pam_env reads them: `KEY=VALUE` lines (an `export ` prefix and one pair
 * of surrounding quotes allowed), comments and blank lines skipped, the last assignment winning.
 */
export function parseEnvironment(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split("\n")) {
    const line = raw.trim().replace(/^export\s+/, "");
    if (line === "" || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    let value = line.slice(eq + 1);
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0]) {
      value = value.slice(1, -1);
    }
    out.set(line.slice(0, eq), value);
  }
  return out;
}

/** Index of the line that ends the `[main]` section (the next section header, or the end). */
function mainSection(lines: string[]): { start: number; end: number } | undefined {
  const start = lines.findIndex((l) => /^\s*\[main\]\s*$/.test(l));
  if (start < 0) return undefined;
  let end = lines.findIndex((l, i) => i > start && /^\s*\[.*\]\s*$/.test(l));
  if (end < 0) end = lines.length;
  while (end > start + 1 && lines[end - 1].trim() === "") end--;
  return { start, end };
}

const PROXY_OPTION = /^\s*proxy\s*[=:]/;

/**
 * dnf.conf with `proxy=<url>` in a marked block at the end of `[main]` (a `[main]` is added when there is none) and
 * any other `proxy` line of `[main]` commented out (dnf would otherwise read two values).
 */
export function dnfConfFile(current: string | undefined, proxy: string): string {
  const lines = withoutBlock(current ?? "").split("\n");
  if (lines.at(-1) === "") lines.pop();
  let main = mainSection(lines);
  if (!main) {
    lines.unshift("[main]");
    main = { start: 0, end: 1 };
  }
  for (let i = main.start + 1; i < main.end; i++) {
    if (PROXY_OPTION.test(lines[i])) lines[i] = `${REPLACED}${lines[i].trim()}`;
  }
  lines.splice(main.end, 0, ...block([`proxy=${proxy}`]).trimEnd().split("\n"));
  return `${lines.join("\n")}\n`;
}

/** dnf's `proxy` option as dnf reads `[main]` (the last value wins); undefined when not set. */
export function parseDnfProxy(text: string): string | undefined {
  const lines = text.split("\n");
  const main = mainSection(lines);
  let value: string | undefined;
  if (!main) return undefined;
  for (const line of lines.slice(main.start + 1, main.end)) {
    const m = /^\s*proxy\s*[=:]\s*(.*?)\s*$/.exec(line);
    if (m) value = m[1];
  }
  return value;
}

/** The apt configuration file. */
export function aptFile(options: Map<string, string>): string {
  return `${APT_HEADER}\n${[...options].map(([k, v]) => `${k} "${v}";`).join("\n")}\n`;
}

/** apt's merged configuration as apt reads it under the node's root (`apt-config dump`, so a later file shows). */
export async function readApt(io: EnforcerIO): Promise<Map<string, string> | string> {
  const scratch = await Deno.makeTempDir({ prefix: "svc-apt-read-" });
  try {
    await Deno.writeTextFile(
      `${scratch}/apt.conf`,
      `Dir::Etc::Parts "${await io.fs.resolve("/etc/apt/apt.conf.d")}";\n` +
        `Dir::Etc::Main "${await io.fs.resolve("/etc/apt/apt.conf")}";\n`,
    );
    const result = await io.runner.run("apt-config", ["dump", "Acquire"], {
      env: { APT_CONFIG: `${scratch}/apt.conf` },
      timeoutMs: 60_000,
    });
    if (!result.success) return `apt-config failed: ${(result.stderr || result.stdout).trim().slice(0, 500)}`;
    const out = new Map<string, string>();
    for (const m of result.stdout.matchAll(/^(\S+) "(.*)";$/gm)) out.set(m[1], m[2]);
    return out;
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}
