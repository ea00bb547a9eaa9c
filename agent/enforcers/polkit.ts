/**
 * Polkit enforcer: one rules file per policy in `/etc/polkit-1/rules.d/`, named so that a higher binding
 * priority is evaluated first (polkitd reads the files in lexical order and the first rule returning a result
 * wins; see `shared/polkit_js.ts`). polkitd watches the directory, so no reload is needed.
 *
 * A desktop type over `desktop_enforcer.ts` (re-validation, polkit missing → INAPPLICABLE and watched, writing,
 * release). Its own rules: the JavaScript is rendered from the structure (`shared/polkit_js.ts`) and, as part
 * of re-validation, refused unless `polkit_script.ts` proves it is exactly the expected rules; files carrying
 * svc's marker that no policy wants any more are removed even when the state lost them (`strays`), files
 * without it are never touched.
 *
 * Compliance: the file is read back and compared with the rendering; each rule's exact action ids are asked
 * of the node's polkit authority (`pkaction`, or the action files under the agent's root when it is not
 * `/`): an action the node does not have is reported INAPPLICABLE for that rule only. Where a rule's decision
 * can be evaluated (it names a user, or applies to everyone, and asks nothing of the session or action
 * details), `pkcheck` run as that user (`polkit/pkcheck.ts`) says whether polkit really answers what the rule
 * says, or a rule read earlier decides first. Every file is written before any is checked; the files sort in the engine's policy
 * order, so a rule read earlier is always one of a policy reported before.
 *
 * @module
 */

import { type PolkitPolicy } from "../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { polkitType } from "../../shared/policy_types/polkit.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import {
  POLKIT_MARKER,
  POLKIT_RULES_DIR,
  polkitFileName,
  renderPolkitRules,
} from "../../shared/polkit_js.ts";
import { scanPolkitActions } from "../catalogue.ts";
import type { CachedPolicy, EnforcerIO, ItemResult } from "../sync/types.ts";
import { checkedContent } from "./revalidate.ts";
import { type Checked, desktopEnforcer, summarize } from "./desktop_enforcer.ts";
import { checkPolkitScript, PolkitScriptError } from "./polkit_script.ts";
import {
  expectedAnswer,
  pkcheckAccounts,
  pkcheckAs,
  pkcheckSubject,
  type PolkitAnswer,
  type RunCommand,
} from "./polkit/pkcheck.ts";

export { pkcheckAs, pkcheckSubject, type PolkitAnswer, type RunCommand } from "./polkit/pkcheck.ts";

/** A policy's content and its rules file. */
interface Rendered {
  message: PolkitPolicy;
  path: string;
  text: string;
}

/**
 * A policy's content and the rules file it becomes, rendered and its script checked before anything is written;
 * a script the checker refuses is rejected content like any other.
 */
function rendered(policy: CachedPolicy): Rendered {
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

/** What the node shows after the write. */
interface PolkitState {
  /** Rules file → its text, or why it could not be written or read. */
  files: Map<string, { text?: string } | { error: string }>;
  actions?: { ids: Set<string>; source: string };
  /** Policy id → rule index → action id → what pkcheck answered. */
  answers: Map<string, Map<number, Map<string, PolkitAnswer | { error: string }>>>;
}

async function readBack(
  io: EnforcerIO,
  plan: { valid: Checked<Rendered>[] },
  failed: Map<string, string>,
): Promise<PolkitState> {
  const state: PolkitState = { files: new Map(), answers: new Map() };
  for (const { message: { path } } of plan.valid) {
    const error = failed.get(path);
    if (error) state.files.set(path, { error });
    else {
      state.files.set(
        path,
        await io.fs.readTextFile(path).then((text) => ({ text }), (err) => ({
          error: `cannot write ${path}: ${(err as Error).message}`,
        })),
      );
    }
  }
  state.actions = await knownActions(io);
  // The authority can be asked only about the node itself (root `/`), with pkcheck and setpriv at hand.
  const canCheck = io.fs.root === "/" && state.actions?.source === "pkaction" &&
    (await io.runner.which("pkcheck")) !== undefined && (await io.runner.which("setpriv")) !== undefined;
  if (!canCheck) return state;
  const users = await pkcheckAccounts(io);
  const run: RunCommand = (cmd, args) => io.runner.run(cmd, args, { timeoutMs: 20_000 });
  for (const { policy, message: { message, path, text } } of plan.valid) {
    const file = state.files.get(path)!;
    if (!("text" in file) || file.text !== text) continue;
    const perRule = new Map<number, Map<string, PolkitAnswer | { error: string }>>();
    state.answers.set(policy.id, perRule);
    for (const [i, rule] of message.rules.entries()) {
      const subject = pkcheckSubject(rule);
      const account = subject === undefined ? undefined : users.get(subject);
      const answers = new Map<string, PolkitAnswer | { error: string }>();
      perRule.set(i, answers);
      for (const id of account ? rule.actionIds.filter((a) => state.actions?.ids.has(a)) : []) {
        answers.set(id, await pkcheckAs(run, account!, id));
      }
    }
  }
  return state;
}

function report({ policy, message: { message: m, path, text } }: Checked<Rendered>, state: PolkitState) {
  const file = state.files.get(path)!;
  if ("error" in file) return { status: "ERROR" as const, message: file.error, items: [] };
  const { actions } = state;
  const items: ItemResult[] = [];
  for (const [i, rule] of m.rules.entries()) {
    const schemaId = `polkit:${rule.name || `rule ${i}`}`;
    const intact = file.text === text;
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
    const subject = pkcheckSubject(rule);
    for (const [id, answer] of state.answers.get(policy.id)?.get(i) ?? []) {
      const expected = expectedAnswer(rule);
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
  return {
    ...summarize(items, {
      inEffect: (_, missing) =>
        `${m.rules.length} rule(s) in ${path}` +
        (missing ? `; ${missing} action id(s) not registered on this node` : ""),
      noneApplies: () => "no action of these rules is registered on this node",
      otherwise: () => `${path} does not hold the rules as generated`,
    }),
    items,
  };
}

/** The Polkit enforcer; see the module documentation. */
export const polkitEnforcer = desktopEnforcer({
  type: polkitType.wireName,
  notifiesUsers: false,
  check: rendered,
  needs: [{
    anyOf: ["/etc/polkit-1", "/usr/share/polkit-1"],
    directory: true,
    missing: "polkit is not installed on this node (no /etc/polkit-1 or /usr/share/polkit-1)",
  }],
  // Actions registered (or pkcheck installed) after the policy arrived.
  reads: ["/usr/share/polkit-1/actions", "/usr/bin/pkcheck"],
  isOwnContent: isOwnRules,
  strays: { dir: POLKIT_RULES_DIR, suffix: ".rules" },
  plan: (valid) =>
    Promise.resolve({ valid, files: new Map(valid.map(({ message: r }) => [r.path, r.text])) }),
  readBack: (io, plan, landed) => readBack(io, plan, landed.failed),
  report: (checked, { state }) => report(checked, state),
});
