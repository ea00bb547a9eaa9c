/**
 * The shape of a policy type and the one helper that builds it, so every type parses, canonicalises and
 * reports errors the same way and a type file only states its schema, merge rule and semantic checks.
 */
import {
  type DescEnum,
  type DescMessage,
  fromJson,
  type JsonValue,
  type Message,
  toJson,
} from "@bufbuild/protobuf";
import type { GenMessage } from "@bufbuild/protobuf/codegenv2";
import { PolicyContentError, type ValidationIssue } from "./errors.ts";
import { parseGuardedJson } from "./json_guard.ts";
import { IssueList } from "./sanitizers.ts";
import type { Permission } from "../permissions.ts";

/**
 * How several policies of one type reaching a node combine (spec: combination rule): merged key by key with
 * the higher priority winning, one generated file per policy, or compiled into one union.
 */
export type MergeRule = "priority_merge" | "file_per_policy" | "union";

/** Options of {@link PolicyTypeDef.parse}. */
export interface ParseOptions {
  /** Skip fields the message does not know (the stream conversion does; validation does not). */
  ignoreUnknownFields?: boolean;
}

/** Everything shared code knows about one policy type. */
export interface PolicyTypeDef<M = unknown> {
  /** Wire name, e.g. `Firefox`: the one place a type's name is written by hand. */
  wireName: string;
  /** How the console names the type to an admin, e.g. `KDE settings`. */
  label: string;
  /** One line: what a policy of this type manages on a node. */
  description: string;
  /** protobuf-es descriptor of the content message (a `GenMessage` from shared/gen). */
  schema: DescMessage;
  /** Member name of `Policy.typed_content` in protobuf-es, e.g. `firefoxPolicy`. */
  typedContentCase: string;
  merge: MergeRule;
  /**
   * A permission needed besides `policy:create`/`policy:edit` to create or edit a policy of this type (Scripts:
   * `policy:edit_scripts`, because its content runs as root on every node it reaches). The server refuses
   * without it; the console hides what the person may not do.
   */
  editPermission?: Permission;
  /**
   * Parses protojson (json_name/camelCase and original snake_case names both accepted) after the size, depth
   * and string limits. Throws {@link PolicyContentError}.
   */
  parse(content: string, opts?: ParseOptions): M;
  /** Semantic checks, including every sanitizer for values that become paths, names, arguments or scripts. */
  validate(message: M): ValidationIssue[];
  /** Stable protojson text (keys sorted, defaults omitted) for storage and export. */
  toCanonicalJson(message: M): string;
}

/** What a type file declares. */
export interface TypeSpec<M extends Message> {
  wireName: string;
  /** {@link PolicyTypeDef.label}. */
  label: string;
  /** {@link PolicyTypeDef.description}. */
  description: string;
  schema: GenMessage<M>;
  typedContentCase: string;
  merge: MergeRule;
  /**
   * Field names in canonical JSON: `json` (json_name, needed by browser types whose JSON is the browser's
   * own policy file) or `proto` (original snake_case names, matching the field paths in messages).
   */
  names: "json" | "proto";
  /** {@link PolicyTypeDef.editPermission}. */
  editPermission?: Permission;
  /** Adds problems to `issues`; the empty-content rule ("needs at least one …") belongs here too. */
  check(message: M, issues: IssueList): void;
}

/** Builds a {@link PolicyTypeDef} from a {@link TypeSpec}. */
export function defineType<M extends Message>(spec: TypeSpec<M>): PolicyTypeDef<M> {
  return {
    wireName: spec.wireName,
    label: spec.label,
    description: spec.description,
    schema: spec.schema,
    typedContentCase: spec.typedContentCase,
    merge: spec.merge,
    editPermission: spec.editPermission,
    parse(content, opts = {}) {
      const json = parseGuardedJson(content);
      try {
        return fromJson(spec.schema, json as JsonValue, {
          ignoreUnknownFields: opts.ignoreUnknownFields ?? false,
        }) as M;
      } catch (err) {
        throw new PolicyContentError(friendlyDecodeError((err as Error).message));
      }
    },
    validate(message) {
      const issues = new IssueList();
      spec.check(message, issues);
      return issues.issues;
    },
    toCanonicalJson(message) {
      const json = toJson(spec.schema, message, { useProtoFieldName: spec.names === "proto" });
      return JSON.stringify(sortKeys(json));
    },
  };
}

/** The message as plain JSON with json_name keys (what browser files contain). */
export function messageJson<M extends Message>(schema: GenMessage<M>, message: M): JsonValue {
  return toJson(schema, message);
}

/** Numbers of the values of an enum, for {@link IssueList.enumValue}. */
export function enumNumbers(desc: DescEnum): number[] {
  return desc.values.map((v) => v.number);
}

/** Recursively sorts object keys so equal content always serialises to equal text. */
export function sortKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const out: Record<string, JsonValue> = {};
    for (const key of Object.keys(value).sort()) out[key] = sortKeys(value[key] as JsonValue);
    return out;
  }
  return value;
}

/** Turns protobuf-es decode errors into text that names the field in the policy's own terms. */
function friendlyDecodeError(message: string): string {
  const unknownKey = /^cannot decode message svc\.policy\.v1\.(\w+) from JSON: key "(.*)" is unknown$/.exec(
    message,
  );
  if (unknownKey) return `unknown field "${unknownKey[2]}" in ${unknownKey[1]}; check the spelling`;
  const field = /^cannot decode field svc\.policy\.v1\.(\w+)\.(\w+) from JSON: (.*)$/.exec(message);
  if (field) return `field ${field[2]} of ${field[1]}: ${field[3]}`;
  const enumValue = /^cannot decode enum svc\.policy\.v1\.(\w+) from JSON: (.*)$/.exec(message);
  if (enumValue) return `${enumValue[2]} is not a ${enumValue[1]} value`;
  const notObject = /^cannot decode message svc\.policy\.v1\.(\w+) from JSON: (.*)$/.exec(message);
  if (notObject) return `${notObject[1]} must be a JSON object, got ${notObject[2]}`;
  return message.replace(/svc\.policy\.v1\./g, "");
}
