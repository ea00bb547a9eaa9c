/**
 * Polkit enforcer: one rules file per policy in `/etc/polkit-1/rules.d/`, named so that a higher binding
 * priority is evaluated first (polkitd reads the files in lexical order and the first rule returning a result
 * wins; see `shared/polkit_js.ts`). polkitd watches the directory, so no reload is needed.
 *
 * Server data is untrusted: every policy is validated again, the JavaScript is rendered from the structure
 * (`shared/polkit_js.ts`), and before a file lands the generated text is parsed with a real JavaScript parser
 * (acorn) and refused unless it is exactly the expected `polkit.addRule(function (action, subject) {…})`
 * calls built from the allowed conditions. Files carrying svc's marker that no policy wants any more are
 * removed; files without it are never touched.
 *
 * Compliance: the file is read back and compared with the rendering; each rule's exact action ids are asked
 * of the node's polkit authority (`pkaction`, or the action files under the agent's root when it is not
 * `/`): an action the node does not have is reported INAPPLICABLE for that rule only. Where a rule's decision
 * can be evaluated (it names a user, or applies to everyone, and asks nothing of the session or action
 * details), `pkcheck` run as that user says whether polkit really answers what the rule says, or a rule read
 * earlier decides first.
 *
 * @module
 */

import * as acorn from "acorn";
import { type PolkitPolicy } from "../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { polkitType } from "../../shared/policy_types/polkit.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import {
  POLKIT_MARKER,
  POLKIT_RESULT_NAMES,
  POLKIT_RULES_DIR,
  polkitFileName,
  renderPolkitRules,
} from "../../shared/polkit_js.ts";
import { scanPolkitActions } from "../catalogue.ts";
import {
  type CachedPolicy,
  type Enforcer,
  type EnforcerIO,
  type ItemResult,
  type PolicyResult,
  rollupStatus,
  type SyncResult,
} from "../sync/types.ts";
import { checkedContent, revalidate } from "./revalidate.ts";

/** Generated JavaScript that is not the expected shape. */
export class PolkitScriptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PolkitScriptError";
  }
}

// deno-lint-ignore no-explicit-any -- acorn's ESTree nodes are walked by hand with their `type` tags
type Node = any;

const RESULTS = new Set(Object.values(POLKIT_RESULT_NAMES));

function isMember(node: Node, object: string, property: string): boolean {
  return node?.type === "MemberExpression" && !node.computed && node.object.type === "Identifier" &&
    node.object.name === object && node.property.type === "Identifier" && node.property.name === property;
}

function isString(node: Node): boolean {
  return node?.type === "Literal" && typeof node.value === "string";
}

/** `action.id === "…"`, `action.id.indexOf("…") === 0`, `subject.user === "…"`, `action.lookup("…") !== "…"`. */
function checkComparison(node: Node): void {
  if (node.operator !== "===" && node.operator !== "!==") {
    throw new PolkitScriptError(`operator ${node.operator}`);
  }
  const left = node.left;
  if (isMember(left, "action", "id") || isMember(left, "subject", "user")) {
    if (!isString(node.right)) throw new PolkitScriptError("comparison with a non-string");
    return;
  }
  if (
    left.type === "CallExpression" && left.arguments.length === 1 && isString(left.arguments[0]) &&
    left.callee.type === "MemberExpression" && !left.callee.computed
  ) {
    if (isMember(left.callee, "action", "lookup") && isString(node.right)) return;
    if (
      left.callee.property.name === "indexOf" && isMember(left.callee.object, "action", "id") &&
      node.right.type === "Literal" && node.right.value === 0
    ) return;
  }
  throw new PolkitScriptError("unexpected comparison");
}

function checkCondition(node: Node): void {
  switch (node?.type) {
    case "LogicalExpression":
      if (node.operator !== "||") throw new PolkitScriptError(`operator ${node.operator}`);
      checkCondition(node.left);
      checkCondition(node.right);
      return;
    case "UnaryExpression":
      if (node.operator !== "!") throw new PolkitScriptError(`operator ${node.operator}`);
      checkCondition(node.argument);
      return;
    case "BinaryExpression":
      checkComparison(node);
      return;
    case "MemberExpression":
      if (isMember(node, "subject", "local") || isMember(node, "subject", "active")) return;
      throw new PolkitScriptError("unexpected property");
    case "CallExpression":
      if (
        isMember(node.callee, "subject", "isInGroup") && node.arguments.length === 1 &&
        isString(node.arguments[0])
      ) {
        return;
      }
      throw new PolkitScriptError("unexpected call");
    default:
      throw new PolkitScriptError(`unexpected ${node?.type ?? "nothing"} in a condition`);
  }
}

/**
 * Parses `text` as JavaScript (never runs it) and checks that it is exactly `ruleCount` calls
 * `polkit.addRule(function (action, subject) { if (<condition>) return; … return polkit.Result.X; })`.
 *
 * @throws {PolkitScriptError} naming what does not fit.
 */
export function checkPolkitScript(text: string, ruleCount: number): void {
  let program: Node;
  try {
    program = acorn.parse(text, { ecmaVersion: 5, sourceType: "script", allowReturnOutsideFunction: false });
  } catch (err) {
    throw new PolkitScriptError(`does not parse as JavaScript: ${(err as Error).message}`);
  }
  if (program.body.length !== ruleCount) {
    throw new PolkitScriptError(
      `has ${program.body.length} statements, expected ${ruleCount} polkit.addRule calls`,
    );
  }
  program.body.forEach((statement: Node, i: number) => {
    const where = `statement ${i}`;
    const call = statement.type === "ExpressionStatement" ? statement.expression : undefined;
    if (
      call?.type !== "CallExpression" || !isMember(call.callee, "polkit", "addRule") ||
      call.arguments.length !== 1
    ) {
      throw new PolkitScriptError(`${where} is not a polkit.addRule call`);
    }
    const fn = call.arguments[0];
    if (
      fn.type !== "FunctionExpression" || fn.id || fn.params.length !== 2 || fn.params[0].name !== "action" ||
      fn.params[1].name !== "subject"
    ) {
      throw new PolkitScriptError(`${where}: the rule is not function (action, subject)`);
    }
    const body: Node[] = fn.body.body;
    const last = body[body.length - 1];
    if (
      last?.type !== "ReturnStatement" || last.argument?.type !== "MemberExpression" ||
      !isMember(last.argument.object, "polkit", "Result") || !RESULTS.has(last.argument.property.name)
    ) {
      throw new PolkitScriptError(`${where}: the rule does not end with return polkit.Result.<answer>`);
    }
    for (const s of body.slice(0, -1)) {
      if (
        s.type !== "IfStatement" || s.alternate || s.consequent.type !== "ReturnStatement" ||
        s.consequent.argument
      ) {
        throw new PolkitScriptError(`${where}: only "if (condition) return;" may precede the answer`);
      }
      try {
        checkCondition(s.test);
      } catch (err) {
        throw new PolkitScriptError(`${where}: ${(err as Error).message}`);
      }
    }
  });
}

/**
 * A policy's content and the rules file it becomes, rendered and its script checked before anything is written;
 * a script the checker refuses is rejected content like any other.
 */
function rendered(policy: CachedPolicy): { message: PolkitPolicy; path: string; text: string } {
  const message = checkedContent(policy, polkitType);
  const text = renderPolkitRules(message, { policyId: policy.id, policyName: policy.name });
  try {
    checkPolkitScript(text, message.rules.length);
  } catch (err) {
    if (err instanceof PolkitScriptError) throw new PolicyContentError(err.message);
    throw err;
  }
  return { message, path: `${POLKIT_RULES_DIR}/${polkitFileName(policy.id, policy.priority)}`, text };
}

/** Whether a rules file is svc's own. */
export function isOwnRules(text: string): boolean {
  return text.startsWith(POLKIT_MARKER);
}

/** Action ids the node's polkit knows, or undefined when that cannot be asked. */
async function knownActions(io: EnforcerIO): Promise<{ ids: Set<string>; source: string } | undefined> {
  if (io.fs.root === "/") {
    const r = await io.runner.run("pkaction", [], { timeoutMs: 20_000 });
    if (r.success) {
      return { ids: new Set(r.stdout.split("\n").map((l) => l.trim()).filter((l) => l)), source: "pkaction" };
    }
  }
  const scanned = await scanPolkitActions(io.fs);
  return scanned ? { ids: new Set(scanned.map((a) => a.actionId)), source: "the action files" } : undefined;
}

/** What polkit answers, as pkcheck tells it: yes, no, or an authentication challenge (kept or not). */
export type PolkitAnswer = "yes" | "no" | "challenge" | "challenge_keep";

const EXPECTED_ANSWER: Record<string, PolkitAnswer> = {
  YES: "yes",
  NO: "no",
  AUTH_SELF: "challenge",
  AUTH_ADMIN: "challenge",
  AUTH_SELF_KEEP: "challenge_keep",
  AUTH_ADMIN_KEEP: "challenge_keep",
};

/** Runs a command (the agent's runner, or a test's with a private bus). */
export type RunCommand = (
  cmd: string,
  args: string[],
) => Promise<{ code: number; stdout: string; stderr: string }>;

/**
 * Asks the node's polkit authority what it answers `account` (uid, gid) for `actionId`: `pkcheck` checks its
 * own process started under the account's identity (`setpriv`), so no process of the user needs to exist. The
 * action id is passed as an argument, never as shell text. Resolves the answer, or what went wrong.
 */
export async function pkcheckAs(
  run: RunCommand,
  account: { uid: number; gid: number },
  actionId: string,
): Promise<PolkitAnswer | { error: string }> {
  const r = await run("setpriv", [
    `--reuid=${account.uid}`,
    `--regid=${account.gid}`,
    "--init-groups",
    "sh",
    "-c",
    'exec pkcheck --action-id "$0" --process $$',
    actionId,
  ]);
  if (r.code === 0) return "yes";
  if (r.code === 1 && /not authorized/i.test(r.stderr + r.stdout)) return "no";
  if (r.code === 2) {
    return /retains_authorization_after_challenge=1/.test(r.stdout) ? "challenge_keep" : "challenge";
  }
  return { error: `pkcheck failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().slice(0, 300)}` };
}

/** uid and gid of the accounts in `/etc/passwd` under the agent's root. */
async function accounts(io: EnforcerIO): Promise<Map<string, { uid: number; gid: number }>> {
  const out = new Map<string, { uid: number; gid: number }>();
  for (const line of ((await io.fs.readTextFile("/etc/passwd")) ?? "").split("\n")) {
    const [name, , uid, gid] = line.split(":");
    if (name && /^\d+$/.test(uid ?? "") && /^\d+$/.test(gid ?? "")) {
      out.set(name, { uid: Number(uid), gid: Number(gid) });
    }
  }
  return out;
}

/**
 * The account a rule can be checked with by pkcheck, or undefined when its decision cannot be evaluated that
 * way: the rule must answer (not NOT_HANDLED), ask nothing of the session (a pkcheck process is neither local
 * nor active) or of action details, exclude no group, and name a user (or nobody, when it applies to all).
 */
export function pkcheckSubject(rule: PolkitPolicy["rules"][number]): string | undefined {
  const m = rule.match;
  if (!EXPECTED_ANSWER[POLKIT_RESULT_NAMES[rule.result]] || rule.actionConditions.length > 0) {
    return undefined;
  }
  if (m?.requireLocal || m?.requireActive || (m?.excludeUnixGroups.length ?? 0) > 0) return undefined;
  const excluded = new Set(m?.excludeUnixUsers ?? []);
  if (m?.unixUsers.length) return m.unixUsers.find((u) => !excluded.has(u));
  if (m?.unixGroups.length) return undefined;
  return excluded.has("nobody") ? undefined : "nobody";
}

/** The Polkit enforcer; see the module documentation. */
export const polkitEnforcer: Enforcer = {
  type: "Polkit",
  notifiesUsers: false,
  // polkit installed (or its actions added) after the policy arrived.
  watches: () => ["/etc/polkit-1", "/usr/share/polkit-1", "/usr/share/polkit-1/actions", "/usr/bin/pkcheck"],

  async sync(policies: CachedPolicy[], io: EnforcerIO): Promise<SyncResult> {
    const changed: string[] = [];
    const results: PolicyResult[] = [];
    const installed = (await io.fs.stat("/etc/polkit-1"))?.isDirectory === true ||
      (await io.fs.stat("/usr/share/polkit-1"))?.isDirectory === true;
    const { valid, rejected } = revalidate("Polkit", policies, { check: rendered, logger: io.logger });
    results.push(...rejected);
    const planned = valid.map(({ policy, message }) => ({ policy, ...message }));
    const wanted = new Set(installed ? planned.map((p) => p.path) : []);
    for (const path of io.managedPaths()) {
      if (!wanted.has(path) && await io.releaseManaged(path)) changed.push(path);
    }
    // svc files the state does not know (state lost): recognised by the marker, removed; others untouched.
    for (const name of await io.fs.readDir(POLKIT_RULES_DIR)) {
      const path = `${POLKIT_RULES_DIR}/${name}`;
      if (wanted.has(path) || !name.endsWith(".rules")) continue;
      const text = await io.fs.readTextFile(path).catch(() => undefined);
      if (text !== undefined && isOwnRules(text) && await io.fs.remove(path)) changed.push(path);
    }
    if (!installed) {
      for (const { policy } of planned) {
        results.push({
          policyId: policy.id,
          status: "INAPPLICABLE",
          message: "polkit is not installed on this node (no /etc/polkit-1 or /usr/share/polkit-1)",
          items: [],
        });
      }
      return { policies: results, changed };
    }

    const actions = planned.length ? await knownActions(io) : undefined;
    // The authority can be asked only about the node itself (root `/`), with pkcheck and setpriv at hand.
    const canCheck = planned.length > 0 && io.fs.root === "/" && actions?.source === "pkaction" &&
      (await io.runner.which("pkcheck")) !== undefined && (await io.runner.which("setpriv")) !== undefined;
    const users = canCheck ? await accounts(io) : new Map<string, { uid: number; gid: number }>();
    const run: RunCommand = (cmd, args) => io.runner.run(cmd, args, { timeoutMs: 20_000 });
    for (const { policy, message: m, path, text } of planned) {
      const items: ItemResult[] = [];
      let written: string | undefined;
      try {
        if (await io.writeManaged(path, text, { mode: 0o644, isOwnContent: isOwnRules })) changed.push(path);
        written = await io.fs.readTextFile(path);
      } catch (err) {
        results.push({
          policyId: policy.id,
          status: "ERROR",
          message: `cannot write ${path}: ${(err as Error).message}`,
          items: [],
        });
        continue;
      }
      for (const [i, rule] of m.rules.entries()) {
        const schemaId = `polkit:${rule.name || `rule ${i}`}`;
        const intact = written === text;
        items.push({
          schemaId,
          key: `rules[${i}]`,
          status: intact ? "COMPLIANT" : "NON_COMPLIANT",
          message: intact ? `in ${path}` : `${path} does not hold the rule as generated (missing or edited)`,
        });
        for (const id of rule.actionIds) {
          if (!actions) continue;
          const known = actions.ids.has(id);
          items.push({
            schemaId,
            key: `rules[${i}].action:${id}`,
            status: known ? "COMPLIANT" : "INAPPLICABLE",
            message: known
              ? `action ${id} is registered`
              : `action ${id} is not registered on this node (checked with ${actions.source}); the rule has no effect for it`,
          });
        }
        const subject = canCheck && intact ? pkcheckSubject(rule) : undefined;
        const account = subject === undefined ? undefined : users.get(subject);
        for (const id of account ? rule.actionIds.filter((a) => actions?.ids.has(a)) : []) {
          const expected = EXPECTED_ANSWER[POLKIT_RESULT_NAMES[rule.result]];
          const answer = await pkcheckAs(run, account!, id);
          const key = `rules[${i}].pkcheck:${id}`;
          if (typeof answer === "object") {
            items.push({ schemaId, key, status: "UNKNOWN", message: answer.error });
          } else {
            items.push({
              schemaId,
              key,
              status: answer === expected ? "COMPLIANT" : "NON_COMPLIANT",
              message: answer === expected
                ? `polkit answers ${answer} to ${subject}`
                : `polkit answers ${answer} to ${subject}, the rule says ${expected}: a rule read earlier decides first`,
            });
          }
        }
      }
      const status = rollupStatus(items);
      const missing = items.filter((i) => i.status === "INAPPLICABLE").length;
      results.push({
        policyId: policy.id,
        status,
        message: status === "COMPLIANT"
          ? `${m.rules.length} rule(s) in ${path}` +
            (missing ? `; ${missing} action id(s) not registered on this node` : "")
          : status === "INAPPLICABLE"
          ? "no action of these rules is registered on this node"
          : `${path} does not hold the rules as generated`,
        items,
      });
    }
    return { policies: results, changed };
  },
};
