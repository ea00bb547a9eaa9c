/**
 * `Policy.typed_content` as bytes: the type's content message in protobuf binary, encoded once and written
 * into every stream message that carries the policy, so building a snapshot copies bytes instead of parsing
 * the content again. Pure (no database, no cache): it runs in the bundle worker for large content
 * (`typed_content_cache.ts` decides where).
 */
import { type DescField, type Message, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type Policy, PolicySchema } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { getPolicyType } from "../../shared/policy_types/mod.ts";

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

/**
 * Puts the encoded member into `policy` (whose `typedContent` is unset): protobuf-es writes it as it writes a
 * field it does not know, byte for byte, and every reader decodes it as the typed member it is.
 */
export function withTypedContent(policy: Policy, typed: EncodedTypedContent | undefined): Policy {
  if (typed) {
    policy.$unknown = [{ no: typed.fieldNumber, wireType: WireType.LengthDelimited, data: typed.payload }];
  }
  return policy;
}
