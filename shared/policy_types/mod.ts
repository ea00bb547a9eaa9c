/**
 * The policy type registry: for every known wire name its content message, how to parse and canonicalise
 * it, how it is validated and how several policies of the type combine on a node. Runs unchanged in the
 * server, the agent and the browser (it imports only shared/gen and @bufbuild/protobuf).
 *
 * Content validation (spec rules 1–5) is {@link validatePolicyContent}: empty or `{}` content is refused,
 * content must parse as the type's message within hard size/depth limits, at least one setting (or rule) is
 * required, and every value that becomes a path, file name, command argument or script is checked. Unknown
 * types pass, for forward compatibility.
 */
import type { Message } from "@bufbuild/protobuf";
import type { PolicyTypeDef } from "./define.ts";
import { PolicyContentError, type ValidationIssue } from "./errors.ts";
import { REGISTERED_TYPES } from "./registry.gen.ts";

export type { MergeRule, ParseOptions, PolicyTypeDef } from "./define.ts";
export { PolicyContentError, type ValidationIssue } from "./errors.ts";
export { MAX_CONTENT_BYTES, MAX_JSON_DEPTH, MAX_STRING_LENGTH } from "./sanitizers.ts";

// Written by `deno task proto` from the Policy.typed_content oneof (proto/policy_registries.ts): a type is
// registered by declaring its member there and its definition in ./<type>.ts.
const TYPES: readonly PolicyTypeDef[] = REGISTERED_TYPES;

const BY_NAME = new Map(TYPES.map((t) => [t.wireName, t]));

/** The type registered under `wireName` (case-sensitive), or undefined for an unknown type. */
export function getPolicyType(wireName: string): PolicyTypeDef | undefined {
  return BY_NAME.get(wireName);
}

/** Every known type, in the order of the spec's list of wire names. */
export function listPolicyTypes(): PolicyTypeDef[] {
  return [...TYPES];
}

/** True when `content` counts as empty: blank, or a JSON object without keys (`{}`, `{ }`). */
export function isEmptyContent(content: string): boolean {
  const trimmed = content.trim();
  return trimmed === "" || /^\{\s*\}$/.test(trimmed);
}

/**
 * Validates content for a type (spec: content validation, rules 1–5). Returns the problems, each naming its
 * field and the fix; an empty list means valid. Unknown types return no problems.
 */
export function validatePolicyContent(wireName: string, content: string): ValidationIssue[] {
  return checkPolicyContent(wireName, content, { canonical: false }).issues;
}

/** Outcome of {@link checkPolicyContent}. */
export interface ContentCheck {
  /** The problems; empty when the content is valid. */
  issues: ValidationIssue[];
  /** Canonical protojson of valid content of a known type (when asked for); undefined otherwise. */
  canonical?: string;
}

/**
 * {@link validatePolicyContent} and, for valid content of a known type, its canonical protojson, parsing the
 * content once (validation and canonicalisation each parsed it before, doubling the cost of a large policy).
 */
export function checkPolicyContent(
  wireName: string,
  content: string,
  options: { canonical?: boolean } = {},
): ContentCheck {
  const def = getPolicyType(wireName);
  if (!def) return { issues: [] };
  if (isEmptyContent(content)) return { issues: [{ field: "", message: "policy content is empty" }] };
  let message: unknown;
  try {
    message = def.parse(content);
  } catch (err) {
    if (err instanceof PolicyContentError) {
      // A limit hit at a known path names that path; anything else is about the content as a whole.
      return {
        issues: [{
          field: err.field,
          message: err.field ? err.message : `policy content is invalid: ${err.message}`,
        }],
      };
    }
    throw err;
  }
  const issues = def.validate(message);
  if (issues.length > 0 || options.canonical === false) return { issues };
  return { issues, canonical: def.toCanonicalJson(message) };
}

/**
 * The canonical protojson of valid content of a known type (what is stored and exported), or undefined for
 * an unknown type. Throws {@link PolicyContentError} when the content does not parse.
 */
export function canonicalPolicyContent(wireName: string, content: string): string | undefined {
  const def = getPolicyType(wireName);
  return def ? def.toCanonicalJson(def.parse(content)) : undefined;
}

/**
 * Converts stored content into the `Policy.typed_content` oneof value for the stream (spec rule 7: unknown
 * fields are ignored). Returns undefined for an unknown type; throws {@link PolicyContentError} when the
 * content does not parse, so the caller can log it and send the policy without typed content.
 */
export function typedContentFor(
  wireName: string,
  content: string,
): { case: string; value: Message } | undefined {
  const def = getPolicyType(wireName);
  if (!def) return undefined;
  return { case: def.typedContentCase, value: def.parse(content, { ignoreUnknownFields: true }) as Message };
}
