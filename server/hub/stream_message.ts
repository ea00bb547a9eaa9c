/**
 * A stream message (`PolicyUpdate`) written into one buffer of its exact size.
 *
 * A policy's large members (content and typed content, typed_content.ts) ride as ready bytes. protobuf-es
 * would write them into a buffer it grows by doubling, shift the whole nested policy to widen its length
 * prefix, and copy the result out: for a 1 MiB policy, several fresh multi-megabyte buffers. Touching fresh
 * memory is what such a message costs (the first write of each page faults; on the virtual machines measured
 * here about 2.6 ms per MiB), so the snapshot's message is laid out once, in a single allocation.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import {
  PolicySchema,
  type PolicyUpdate,
  PolicyUpdateSchema,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";

/** Field number of `PolicyUpdate.policy`. */
const POLICY_FIELD = PolicyUpdateSchema.fields.find((f) => f.localName === "policy")!.number;

/** Bytes of `value` as a varint. */
function varintSize(value: number): number {
  let size = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 0x80);
    size++;
  }
  return size;
}

function writeVarint(out: Uint8Array, pos: number, value: number): number {
  while (value >= 0x80) {
    out[pos++] = (value % 0x80) | 0x80;
    value = Math.floor(value / 0x80);
  }
  out[pos++] = value;
  return pos;
}

const lengthDelimitedTag = (no: number) => no * 8 + WireType.LengthDelimited;

/**
 * The binary form of `update`, byte for byte what a protobuf reader decodes as `toBinary` would have written
 * it (fields in another order, which the wire format allows). The policy's unknown fields (its encoded
 * members, `withEncodedMembers`) are copied once into the one buffer.
 */
export function encodePolicyUpdate(update: PolicyUpdate): Uint8Array {
  const policy = update.policy;
  const members = policy?.$unknown ?? [];
  if (!policy || members.length === 0 || members.some((m) => m.wireType !== WireType.LengthDelimited)) {
    return toBinary(PolicyUpdateSchema, update);
  }
  // The small parts through protobuf-es; the members (length prefix included) are appended by hand.
  const head = toBinary(PolicyUpdateSchema, create(PolicyUpdateSchema, { ...update, policy: undefined }));
  const bare = { ...policy };
  delete bare.$unknown;
  const policyHead = toBinary(PolicySchema, bare);
  let policyLength = policyHead.length;
  for (const m of members) policyLength += varintSize(lengthDelimitedTag(m.no)) + m.data.length;
  const tag = lengthDelimitedTag(POLICY_FIELD);
  const out = new Uint8Array(
    head.length + varintSize(tag) + varintSize(policyLength) + policyLength,
  );
  out.set(head, 0);
  let pos = writeVarint(out, head.length, tag);
  pos = writeVarint(out, pos, policyLength);
  out.set(policyHead, pos);
  pos += policyHead.length;
  for (const m of members) {
    pos = writeVarint(out, pos, lengthDelimitedTag(m.no));
    out.set(m.data, pos);
    pos += m.data.length;
  }
  return out;
}
