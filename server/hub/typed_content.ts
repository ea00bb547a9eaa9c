/**
 * `Policy.typed_content` as bytes: the type's content message in protobuf binary, encoded once and written
 * into every stream message that carries the policy, so building a snapshot copies bytes instead of parsing
 * the content again. Pure (no database, no cache): it runs in an off-loop worker for large content
 * (`typed_content_cache.ts` decides where).
 */
import { type DescField, type Message, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type Policy, PolicySchema } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { getPolicyType, PolicyContentError } from "../../shared/policy_types/mod.ts";
import { defineOffLoopJob } from "../core/offloop.ts";

/** The `typed_content` member of `Policy` for each protobuf-es case name. */
const TYPED_FIELDS = new Map<string, DescField>(
  PolicySchema.oneofs.find((o) => o.name === "typed_content")!.fields.map((f) => [f.localName, f]),
);

/**
 * The typed member of stored content, encoded: field number and payload (the message's binary form behind
 * its length, as a length-delimited field carries it). Undefined for an unknown type (no typed member).
 * Throws `PolicyContentError` when the content does not parse. Unknown JSON fields are ignored (spec rule 7).
 */
export function encodeTypedContent(type: string, content: string): EncodedTypedContent | undefined {
  const def = getPolicyType(type);
  if (!def) return undefined;
  const field = TYPED_FIELDS.get(def.typedContentCase);
  if (!field) {
    throw new Error(`policy type ${type} has no Policy.typed_content member ${def.typedContentCase}`);
  }
  const message = def.parse(content, { ignoreUnknownFields: true }) as Message;
  const payload = new BinaryWriter().bytes(toBinary(def.schema, message)).finish();
  return { fieldNumber: field.number, payload };
}

/** A typed member encoded by {@link encodeTypedContent}. */
export interface EncodedTypedContent {
  fieldNumber: number;
  /** Length-prefixed binary of the content message. */
  payload: Uint8Array;
}

/** Field number of `Policy.content`, which {@link encodeContentField} encodes. */
const CONTENT_FIELD = PolicySchema.fields.find((f) => f.localName === "content")!.number;

/**
 * `Policy.content` as a length-delimited field carries it (UTF-8 behind its length). Encoding a 1 MiB text
 * takes several milliseconds; done once per content and written into every message as bytes, no snapshot
 * repeats it.
 */
export function encodeContentField(content: string): Uint8Array {
  return new BinaryWriter().string(content).finish();
}

/** What a delivered policy's stream messages carry as ready bytes: its content, and its typed member. */
export interface EncodedMembers {
  /** `Policy.content` from {@link encodeContentField}. */
  content: Uint8Array;
  /** Undefined for an unknown type and for content that does not parse. */
  typed?: EncodedTypedContent;
}

/** Both encoded members of stored content; throws `PolicyContentError` when the content does not parse. */
export function encodeMembers(type: string, content: string): EncodedMembers {
  return { typed: encodeTypedContent(type, content), content: encodeContentField(content) };
}

/** {@link encodeMembers} in an off-loop worker (server/core/offloop.ts), for large content. */
export const encodeMembersOffLoop: (input: { type: string; content: string }) => Promise<EncodedMembers> =
  defineOffLoopJob(
    "members",
    (job: { type: string; content: string }) => encodeMembers(job.type, job.content),
    {
      invalidWhen: (err) => err instanceof PolicyContentError,
    },
  );

/**
 * Puts the encoded members into `policy` (whose `content` is empty and `typedContent` unset): protobuf-es
 * writes them as it writes fields it does not know, byte for byte, after the known ones, and every reader
 * decodes them as the members they are (field order does not matter on the wire).
 */
export function withEncodedMembers(policy: Policy, members: EncodedMembers): Policy {
  policy.$unknown = [{ no: CONTENT_FIELD, wireType: WireType.LengthDelimited, data: members.content }];
  if (members.typed) {
    const { fieldNumber, payload } = members.typed;
    policy.$unknown.push({ no: fieldNumber, wireType: WireType.LengthDelimited, data: payload });
  }
  return policy;
}
