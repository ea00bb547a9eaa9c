/**
 * The pam_time layer of SessionAccess: one marked block in `/etc/security/time.conf` (one line per restricted
 * account, its allowed times in the node's local time for the coming week; members of named groups resolved
 * from the local account files), and `pam_time.so` in the account stack. On Debian the stack entry is a
 * `pam-auth-update` profile (`/usr/share/pam-configs/svc-time`) enabled with `pam-auth-update --package` (with
 * `--root` under a test root). authselect systems (Fedora/RHEL) need a one-time manual step (a custom profile
 * carrying `pam_time.so`), which the compliance item names; svc never edits authselect's generated files. A
 * rendered block is checked line by line before it is written.
 *
 * @module
 */

import {
  ranges,
  type SessionRuleSet,
  WEEK_MINUTES,
  weeklyTimeline,
} from "../../../shared/session_access_rules.ts";
import type { ComplianceStatusName, EnforcerIO, ItemResult } from "../../sync/types.ts";

/** Node paths svc manages for pam_time. */
export const TIME_CONF = "/etc/security/time.conf";
export const PAM_PROFILE = "/usr/share/pam-configs/svc-time";
const COMMON_ACCOUNT = "/etc/pam.d/common-account";
const BEGIN = "# BEGIN svc session access (managed by svc-agent; edits are overwritten)";
const END = "# END svc session access";

/** PAM services of local logins (text consoles and display managers). */
export const LOGIN_SERVICES = [
  "login",
  "gdm-password",
  "gdm-autologin",
  "lightdm",
  "lightdm-autologin",
  "sddm",
  "sddm-autologin",
  "xdm",
];

/** The pam-auth-update profile that puts pam_time.so in the account stack. */
export const PAM_TIME_PROFILE = `Name: svc session access hours (pam_time)
Default: yes
Priority: 0
Account-Type: Additional
Account:
\trequired\t\t\tpam_time.so
`;

const DAY_CODES = ["Mo", "Tu", "We", "Th", "Fr", "Sa", "Su"];
/** pam_time reads lines into a fixed buffer; longer lines are cut. */
const MAX_LINE = 900;
const LINE_RE = /^[A-Za-z0-9_|.-]+;\*;[A-Za-z0-9_.@-]+\$?;!?(?:(?:Mo|Tu|We|Th|Fr|Sa|Su|Al)\d{4}-\d{4}\|?)+$/;

/** `Mo0800-1700|Tu0800-1700` for a week bitmap of allowed minutes; "" when always allowed. */
export function pamTimes(bits: Uint8Array): string {
  if (bits.every((b) => b === 1)) return "";
  const parts: string[] = [];
  const clock = (m: number) =>
    `${String(Math.floor(m / 60)).padStart(2, "0")}${String(m % 60).padStart(2, "0")}`;
  for (const { from, to } of ranges(bits)) {
    for (let day = Math.floor(from / 1440); day * 1440 < to && day < 7; day++) {
      const start = Math.max(from, day * 1440) - day * 1440;
      const end = Math.min(to, (day + 1) * 1440) - day * 1440;
      parts.push(`${DAY_CODES[day]}${clock(start)}-${clock(end)}`);
    }
  }
  return parts.length ? parts.join("|") : "!Al0000-2400";
}

/** The time.conf text with svc's block replaced by `block` (or removed when empty). */
export function withBlock(text: string, block: string[]): string {
  const lines = text.split("\n");
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END);
  let kept = lines;
  if (begin >= 0 && end > begin) kept = [...lines.slice(0, begin), ...lines.slice(end + 1)];
  let body = kept.join("\n");
  if (body !== "" && !body.endsWith("\n")) body += "\n";
  return block.length ? `${body}${BEGIN}\n${block.join("\n")}\n${END}\n` : body;
}

/** The lines of svc's block in a time.conf text, or undefined when there is none. */
function readBlock(text: string): string[] | undefined {
  const lines = text.split("\n");
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END);
  return begin >= 0 && end > begin ? lines.slice(begin + 1, end) : undefined;
}

/** The block's lines for the coming week from `at`, and every account considered (root never is). */
export function renderBlock(
  ruleSet: SessionRuleSet,
  accounts: Map<string, Set<string>>,
  at: number,
): { lines: string[]; covered: Set<string> } {
  const users = new Set<string>();
  for (const rule of ruleSet.rules) {
    rule.users.forEach((u) => users.add(u));
    for (const [name, groups] of accounts) if (rule.groups.some((g) => groups.has(g))) users.add(name);
  }
  users.delete("root");
  const subjects = [...users].sort().map((user) => ({ user, groups: [...(accounts.get(user) ?? [])] }));
  const timeline = weeklyTimeline(ruleSet, subjects, { viewZone: "", at });
  const services = [...LOGIN_SERVICES, ...(ruleSet.includeSsh ? ["sshd"] : [])].join("|");
  const lines: string[] = [];
  const covered = new Set<string>();
  for (const { user } of subjects) {
    const times = pamTimes(timeline.get(user) ?? new Uint8Array(WEEK_MINUTES).fill(1));
    covered.add(user);
    if (!times) continue;
    const line = `${services};*;${user};${times}`;
    if (line.length > MAX_LINE || !LINE_RE.test(line)) {
      throw new Error(
        `the pam_time line for ${user} cannot be written (too many windows or an unusual name)`,
      );
    }
    lines.push(line);
  }
  return { lines, covered };
}

/** Which PAM configuration tool the node has. */
export async function pamTool(io: EnforcerIO): Promise<"debian" | "authselect" | "none"> {
  if (await io.fs.exists("/usr/sbin/pam-auth-update") || await io.fs.exists("/usr/share/pam-configs")) {
    return "debian";
  }
  if (await io.fs.exists("/etc/authselect") || await io.fs.exists("/usr/bin/authselect")) return "authselect";
  return "none";
}

/** Runs `pam-auth-update --package` with `args` on the root; resolves its complaint, if any. */
export async function pamAuthUpdate(io: EnforcerIO, args: string[]): Promise<string | undefined> {
  const root = io.fs.root;
  const out = await io.runner.run(
    "pam-auth-update",
    [...(root === "/" ? [] : ["--root", root]), "--package", ...args],
    { timeoutMs: 60_000, env: { DEBIAN_FRONTEND: "noninteractive" } },
  );
  return out.success ? undefined : (out.stderr.trim() || out.stdout.trim() || `exit code ${out.code}`);
}

/** Whether the account stack holds pam_time.so. */
async function pamTimeInStack(io: EnforcerIO): Promise<boolean> {
  const text = await io.fs.readTextFile(COMMON_ACCOUNT) ?? "";
  return text.split("\n").some((l) => /^\s*account\s+\S+\s+pam_time\.so\b/.test(l));
}

const pamItem = (key: string, status: ComplianceStatusName, message: string): ItemResult => ({
  schemaId: "pam",
  key,
  status,
  message,
});

/** What svc enforces with pam_time: the node's PAM tool, and svc's block (or why it cannot be rendered). */
export interface PamPlan {
  tool: "debian" | "authselect" | "none";
  block: { lines: string[]; covered: Set<string> } | string;
}

/** pam_time as read back after the sync. */
export interface PamReading {
  /** The items every policy with pam_enforcement gets: svc's block and the stack. */
  pamItems: ItemResult[];
  /** Per covered account: whether the time.conf read back carries its line(s); undefined when unknown. */
  pamAccounts?: Map<string, boolean>;
}

/**
 * Reads pam_time back: svc's block in time.conf against the rendering (or why it was not written) and
 * pam_time.so in the stack (or what enabling it ran into, `stackProblem`).
 */
export async function readPamTime(
  io: EnforcerIO,
  { tool, block }: PamPlan,
  { stackProblem, failed }: { stackProblem?: string; failed: Map<string, string> },
): Promise<PamReading> {
  const items: ItemResult[] = [];
  let pamAccounts: Map<string, boolean> | undefined;
  const problem = typeof block === "string" ? block : failed.get(TIME_CONF);
  if (problem || typeof block === "string") items.push(pamItem(TIME_CONF, "ERROR", problem!));
  else {
    const { lines, covered } = block;
    const back = readBlock(await io.fs.readTextFile(TIME_CONF) ?? "");
    pamAccounts = new Map([...covered].map((user) => {
      const own = lines.filter((l) => l.split(";")[2] === user);
      return [user, own.every((l) => back?.includes(l) === true)];
    }));
    items.push(
      (back ?? []).join("\n") !== lines.join("\n")
        ? pamItem(TIME_CONF, "NON_COMPLIANT", "the svc block reads back differently")
        : lines.length === 0
        // Nothing to write is not a failure: no local account is restricted, so pam_time has nothing to refuse.
        ? pamItem(
          TIME_CONF,
          "INAPPLICABLE",
          "no local account is restricted by these rules, so pam_time has no line to refuse " +
            "(accounts added later are picked up; directory accounts are locked through logind)",
        )
        : pamItem(TIME_CONF, "COMPLIANT", `${lines.length} line(s) for ${covered.size} account(s)`),
    );
  }
  if (tool === "debian") {
    items.push(
      stackProblem ? pamItem("pam stack", "ERROR", stackProblem) : await pamTimeInStack(io)
        ? pamItem(
          "pam stack",
          "COMPLIANT",
          `pam_time.so in ${COMMON_ACCOUNT} (pam-auth-update profile svc-time)`,
        )
        : pamItem("pam stack", "NON_COMPLIANT", `pam_time.so is not in ${COMMON_ACCOUNT}`),
    );
  } else if (tool === "authselect") {
    items.push(pamItem(
      "pam stack",
      "NON_COMPLIANT",
      "authselect system: one manual step is needed — create a custom profile (authselect create-profile " +
        "svc --base-on <current>), add 'account required pam_time.so' to its system-auth and password-auth, " +
        "and select it (authselect select custom/svc); logind enforcement works meanwhile",
    ));
  } else {
    items.push(
      pamItem("pam stack", "NON_COMPLIANT", "no pam-auth-update or authselect: pam_time not enabled"),
    );
  }
  return { pamItems: items, pamAccounts };
}
