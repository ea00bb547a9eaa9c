/**
 * Basic checks shared by the browser types (Firefox, Thunderbird, Chrome, Edge), whose content is the
 * browser's own policy JSON: at least one setting, documented enumerations, URL schemes, no control
 * characters except in free text, and `additional` escape-hatch keys that look like policy names and do not
 * shadow a curated field. Rules are keyed by paths in the browser's JSON (`Homepage.URL`, `Bookmarks[].URL`,
 * `ExtensionSettings.*.installation_mode`).
 */
import type { JsonValue, Message } from "@bufbuild/protobuf";
import type { GenMessage } from "@bufbuild/protobuf/codegenv2";
import { messageJson } from "./define.ts";
import { joinPath } from "./json_guard.ts";
import { type IssueList, multiLineText, singleLine, urlWithScheme } from "./sanitizers.ts";

/** Rule tables of one browser type. */
export interface BrowserRules {
  /** Path pattern → allowed values (strings or integers). */
  enums?: Record<string, readonly (string | number)[]>;
  /** Path pattern → allowed URL schemes; an empty string is accepted where the browser documents it. */
  urls?: Record<string, readonly string[]>;
}

/** Keys allowed in `additional`: what browser policy names look like. */
export const ADDITIONAL_KEY = /^[A-Za-z][A-Za-z0-9_]*$/;

type Segment = string; // an object key, or "[]" for an array element

function parsePattern(pattern: string): Segment[] {
  return pattern.split(".").flatMap((part) => {
    const out: Segment[] = [];
    const base = part.replace(/(\[\])+$/, "");
    if (base) out.push(base);
    for (let i = base.length; i < part.length; i += 2) out.push("[]");
    return out;
  });
}

function matches(pattern: Segment[], segments: Segment[]): boolean {
  return pattern.length === segments.length &&
    pattern.every((p, i) => p === segments[i] || (p === "*" && segments[i] !== "[]"));
}

/**
 * Checks a browser policy message. `curated` names the fields a key in `additional` must not repeat (both
 * json_name and proto name).
 */
export function checkBrowserPolicy<M extends Message & { additional: Record<string, unknown> }>(
  schema: GenMessage<M>,
  message: M,
  rules: BrowserRules,
  issues: IssueList,
): void {
  const json = messageJson(schema, message) as Record<string, JsonValue>;
  if (!hasSetting(json)) {
    issues.add("", "policy content needs at least one setting");
    return;
  }
  const enums = Object.entries(rules.enums ?? {}).map(([p, allowed]) => ({
    pattern: parsePattern(p),
    allowed,
  }));
  const urls = Object.entries(rules.urls ?? {}).map(([p, schemes]) => ({
    pattern: parsePattern(p),
    schemes,
  }));
  const curated = new Set(schema.fields.flatMap((f) => [f.jsonName, f.name]));
  for (const key of Object.keys(message.additional)) {
    const field = joinPath("additional", key);
    if (!ADDITIONAL_KEY.test(key)) {
      issues.add(field, "must look like a policy name: a letter, then letters, digits and '_'");
    } else if (curated.has(key)) {
      issues.add(field, `"${key}" is a curated setting; set it through its own field instead of additional`);
    }
  }
  const stack: { value: JsonValue; path: string; segments: Segment[] }[] = [{
    value: json,
    path: "",
    segments: [],
  }];
  while (stack.length > 0) {
    const { value, path, segments } = stack.pop()!;
    if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: `${path}[${i}]`, segments: [...segments, "[]"] }));
      continue;
    }
    if (value !== null && typeof value === "object") {
      for (const [key, v] of Object.entries(value)) {
        stack.push({ value: v as JsonValue, path: joinPath(path, key), segments: [...segments, key] });
      }
      continue;
    }
    const inAdditional = segments[0] === "additional";
    if (typeof value === "string") {
      const problem = multiLineText(value);
      if (problem) {
        issues.add(path, problem);
        continue;
      }
    }
    if (inAdditional) continue;
    const enumRule = enums.find((r) => matches(r.pattern, segments));
    if (enumRule && !enumRule.allowed.includes(value as string | number)) {
      issues.add(path, `must be one of ${enumRule.allowed.map((a) => JSON.stringify(a)).join(", ")}`);
    }
    const urlRule = urls.find((r) => matches(r.pattern, segments));
    if (urlRule && typeof value === "string" && value !== "") {
      const problem = singleLine(value) ?? urlWithScheme(urlRule.schemes)(value);
      if (problem) issues.add(path, problem);
    }
  }
}

/** True when the JSON sets anything: a scalar, or a non-empty list or object that (recursively) sets something. */
export function hasSetting(value: JsonValue): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (value !== null && typeof value === "object") {
    return Object.values(value).some((v) => hasSetting(v as JsonValue));
  }
  return true;
}
