/**
 * The encoded members of delivered policies ({@link encodeMembers}: the content text as UTF-8 and the typed
 * content), kept per policy for as long as its type and content stay the same. Parsing a large policy costs hundreds of milliseconds (about 300 ms
 * for 1 MiB on a loaded machine); done for every snapshot on the server's thread, it held up every other
 * request and stream that long; encoding 1 MiB of text as UTF-8 took several milliseconds more per snapshot.
 * Now content is parsed and encoded once per change, and large content in an off-loop worker (`runOffLoop`),
 * so a snapshot build only copies bytes.
 *
 * The cache belongs to the process: every replica fills its own on first use, and an entry is used only
 * when the content's digest in the database (`policies.content_sha256`) is the one it was made from, so a
 * snapshot of a cached large policy does not read its content at all.
 */
import { DomainError } from "../core/errors.ts";
import { INLINE_CONTENT_LENGTH } from "../domain/content_offloop.ts";
import type { Logger } from "../core/log.ts";
import type { Queryable } from "../db/db.ts";
import { PolicyContentError } from "../../shared/policy_types/mod.ts";
import {
  encodeContentField,
  type EncodedMembers,
  encodeMembers,
  encodeMembersOffLoop,
} from "./typed_content.ts";

/**
 * Most bytes the cache holds (content text as UTF-16 plus the encoded message), beyond which the least
 * recently used policies are dropped (and encoded again when next delivered).
 */
export const TYPED_CONTENT_CACHE_BYTES = 128 * 1024 * 1024;

interface Entry {
  type: string;
  /** What the entry was made from: hex SHA-256 of the content's UTF-8. */
  digest: string;
  /** Undefined when the policy was deleted before its content was read. */
  members: Promise<EncodedMembers | undefined>;
  /** Bytes counted against {@link TYPED_CONTENT_CACHE_BYTES} (an estimate until the encoding is done). */
  size: number;
}

/** By policy id, least recently used first (a Map keeps insertion order). */
const entries = new Map<string, Entry>();
let cachedBytes = 0;
let encodings = 0;
let contentReads = 0;

/** A policy whose encoded members the stream needs. */
export interface TypedContentSource {
  id: string;
  type: string;
  /** The content, or null when the caller did not read it (large content: read here on a cache miss). */
  content: string | null;
  /** Hex SHA-256 of the content's UTF-8 (`policies.content_sha256`). */
  content_sha256: string;
}

/**
 * The encoded members of `policy`, from the cache or encoded now (on this thread for short content, in the
 * bundle worker for longer). An entry is used when it was made from the same type and content digest, so a
 * snapshot of a cached large policy never reads its content; on a miss, content the caller did not read is
 * read from `q` (whatever is current: a newer content is announced again by its own notice). The typed
 * member is undefined for an unknown type, and for content that does not parse: that is logged once per
 * content and the policy is sent without its typed member, so one bad policy never keeps the others from a
 * node. Undefined altogether when the policy was deleted after the caller read its row and before its
 * content was read: the caller leaves it out, as its deletion is announced by its own notice.
 */
export function encodedMembersOf(
  q: Queryable,
  policy: TypedContentSource,
  log: Logger,
): Promise<EncodedMembers | undefined> {
  const hit = entries.get(policy.id);
  if (hit && hit.type === policy.type && hit.digest === policy.content_sha256) {
    entries.delete(policy.id);
    entries.set(policy.id, hit);
    return hit.members;
  }
  if (hit) forget(policy.id, hit);
  const entry: Entry = {
    type: policy.type,
    digest: policy.content_sha256,
    members: Promise.resolve({ content: new Uint8Array() }),
    size: (policy.content?.length ?? INLINE_CONTENT_LENGTH) * 3,
  };
  entry.members = withContent(q, policy).then((source): Promise<{
    members?: EncodedMembers;
    lasting: boolean;
  }> => {
    if (!source) return Promise.resolve({ lasting: false });
    // Read just now and changed since the caller's row: the entry describes what it was made from.
    entry.digest = source.content_sha256;
    return encode(source as TypedContentSource & { content: string }, log);
  }).then(({ members, lasting }) => {
    if (!lasting || !members) forget(policy.id, entry);
    else if (entries.get(policy.id) === entry) {
      const size = members.content.length + (members.typed?.payload.length ?? 0);
      cachedBytes += size - entry.size;
      entry.size = size;
      trim(entry);
    }
    return members;
  }, (err) => {
    forget(policy.id, entry);
    throw err;
  });
  entries.set(policy.id, entry);
  cachedBytes += entry.size;
  trim(entry);
  return entry.members;
}

/** `policy` with its content, read from the database when the caller left it out; undefined when gone. */
async function withContent(
  q: Queryable,
  policy: TypedContentSource,
): Promise<TypedContentSource | undefined> {
  if (policy.content !== null) return policy;
  contentReads++;
  const [row] = await q.query<{ type: string; content: string; content_sha256: string }>(
    "SELECT type, content, encode(content_sha256, 'hex') AS content_sha256 FROM policies WHERE id = $1",
    [policy.id],
  );
  return row ? { id: policy.id, ...row } : undefined;
}

/** Encodes `policy`'s members; `lasting` is false for a failure worth trying again (a worker failed). */
async function encode(
  policy: TypedContentSource & { content: string },
  log: Logger,
): Promise<{ members: EncodedMembers; lasting: boolean }> {
  encodings++;
  try {
    if (policy.content.length <= INLINE_CONTENT_LENGTH) {
      return { members: encodeMembers(policy.type, policy.content), lasting: true };
    }
    const members = await encodeMembersOffLoop({ type: policy.type, content: policy.content });
    return { members, lasting: true };
  } catch (err) {
    log.warn("hub: policy content does not parse; sending it without typed content", {
      policy: policy.id,
      type: policy.type,
      error: (err as Error).message,
    });
    // Content that does not parse stays so until it changes; anything else is tried again next time.
    return {
      members: { content: encodeContentField(policy.content) },
      lasting: err instanceof PolicyContentError || err instanceof DomainError,
    };
  }
}

function forget(id: string, entry: Entry): void {
  if (entries.get(id) !== entry) return;
  entries.delete(id);
  cachedBytes -= entry.size;
}

/** Drops the least recently used entries while over the limit, never `keep` (the one just asked for). */
function trim(keep: Entry): void {
  for (const [id, entry] of entries) {
    if (cachedBytes <= TYPED_CONTENT_CACHE_BYTES) return;
    if (entry !== keep) forget(id, entry);
  }
}

/**
 * Counters for tests and benchmarks: entries held, bytes counted, encodings done and large contents read
 * (cache misses of content the snapshot query left out) since start.
 */
export function typedContentCacheStats(): {
  entries: number;
  bytes: number;
  encodings: number;
  contentReads: number;
} {
  return { entries: entries.size, bytes: cachedBytes, encodings, contentReads };
}
