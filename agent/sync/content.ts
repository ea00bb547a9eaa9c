/**
 * A cached policy's content as its type's message. The server sends its own parse of the content in
 * `Policy.typed_content`; the agent's generated policy service (agent/gen, see proto/generate.sh) keeps
 * that member as the encoded message, so an agent holds the schemas of the types it enforces only, each
 * decoded here by the type's enforcer once it has loaded. The decoded message is round-tripped through
 * the type's guarded JSON parser like stored content (server data is untrusted).
 *
 * @module
 */

import { fromBinary, type Message, toJsonString } from "@bufbuild/protobuf";
import type { PolicyTypeDef } from "../../shared/policy_types/define.ts";
import type { CachedPolicy } from "./types.ts";

/** The server's parse of `policy.content` as a message of `def`'s type, when it sent one for that type. */
function typedMessage(policy: CachedPolicy, def: PolicyTypeDef): Message | undefined {
  const typed = policy.typed;
  if (!typed) return undefined;
  if ("$typeName" in typed) return typed.$typeName === def.schema.typeName ? typed : undefined;
  if (typed.case !== def.typedContentCase) return undefined;
  try {
    return fromBinary(def.schema, typed.value);
  } catch {
    return undefined; // The stored content is parsed instead.
  }
}

/**
 * `policy`'s content parsed by `def` (unknown fields ignored): the server's typed parse when it sent one
 * of this type, else the stored protojson.
 *
 * @throws {PolicyContentError} naming the problem.
 */
export function parsePolicyContent<M>(policy: CachedPolicy, def: PolicyTypeDef<M>): M {
  const typed = typedMessage(policy, def);
  const text = typed ? toJsonString(def.schema, typed) : policy.content;
  return def.parse(text, { ignoreUnknownFields: true });
}
