/**
 * The guard in front of every Polkit rules file the agent writes: the generated JavaScript is parsed with a real
 * JavaScript parser (acorn, never run) and refused unless it is exactly the expected
 * `polkit.addRule(function (action, subject) {…})` calls built from the allowed conditions, so no server content
 * can smuggle code into polkitd (see `shared/polkit_js.ts` for the rendering).
 *
 * @module
 */

import * as acorn from "acorn";
import { POLKIT_RESULT_NAMES } from "../../shared/polkit_js.ts";

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
 * Parses `text` as JavaScript (never runs it) and checks that it is exactly one
 * `polkit.addAdminRule(function (action, subject) { return ["…", …]; })` returning `identityCount` string
 * literals: the Privilege type's administrator identities (`shared/polkit_js.ts`).
 *
 * @throws {PolkitScriptError} naming what does not fit.
 */
export function checkPolkitAdminScript(text: string, identityCount: number): void {
  let program: Node;
  try {
    program = acorn.parse(text, { ecmaVersion: 5, sourceType: "script", allowReturnOutsideFunction: false });
  } catch (err) {
    throw new PolkitScriptError(`does not parse as JavaScript: ${(err as Error).message}`);
  }
  const call = program.body.length === 1 && program.body[0].type === "ExpressionStatement"
    ? program.body[0].expression
    : undefined;
  if (
    call?.type !== "CallExpression" || !isMember(call.callee, "polkit", "addAdminRule") ||
    call.arguments.length !== 1
  ) {
    throw new PolkitScriptError("is not exactly one polkit.addAdminRule call");
  }
  const fn = call.arguments[0];
  if (
    fn.type !== "FunctionExpression" || fn.id || fn.params.length !== 2 || fn.params[0].name !== "action" ||
    fn.params[1].name !== "subject"
  ) {
    throw new PolkitScriptError("the admin rule is not function (action, subject)");
  }
  const body: Node[] = fn.body.body;
  const list = body.length === 1 && body[0].type === "ReturnStatement" ? body[0].argument : undefined;
  if (
    list?.type !== "ArrayExpression" || list.elements.length !== identityCount ||
    !list.elements.every((e: Node) => isString(e) && /^unix-(user|group):/.test(e.value))
  ) {
    throw new PolkitScriptError(
      `the admin rule does not return exactly ${identityCount} unix-user:/unix-group: identities`,
    );
  }
}
