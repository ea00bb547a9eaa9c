/**
 * The last policy set the agent received, kept in `{data_dir}/state/policies.json` (mode 0600, root-only like
 * the rest of the data directory) so that after a reboot without the server (a laptop on a train) the agent
 * enforces and watches it again before any connection, instead of leaving the node as the boot found it.
 *
 * The file carries the SHA-256 of its body. A file that does not match (torn write, disk error, a hand edit) is
 * not used: the agent then waits for the server as on first start, and the managed files stay as they are on
 * disk, so nothing is lifted either way. Writes are atomic (temporary file, fsync, rename).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { readFileIfExists, writeFileAtomic } from "../fs.ts";
import type { Logger } from "../log.ts";
import { sha256Hex } from "./managed_files.ts";
import type { CachedPolicy, EncodedTypedContent } from "./types.ts";

const FORMAT = 1;

/** A cached policy as stored: typed content as its member name and base64 bytes. */
interface StoredPolicy extends Omit<CachedPolicy, "typed"> {
  typed?: { case: string; value: string };
}

interface StoreFile {
  format: number;
  /** SHA-256 (hex) of `body`. */
  sha256: string;
  /** JSON of {@linkcode StoreBody}. */
  body: string;
}

interface StoreBody {
  savedAt: string;
  policies: StoredPolicy[];
}

/** What {@linkcode PolicyStore.load} found. */
export interface StoredPolicies {
  policies: CachedPolicy[];
  savedAt: Date;
}

/** See the module documentation. */
export class PolicyStore {
  readonly path: string;
  readonly #logger: Logger;
  #writing: Promise<void> = Promise.resolve();

  constructor(dataDir: string, logger: Logger) {
    this.path = `${dataDir}/state/policies.json`;
    this.#logger = logger;
  }

  /** The stored set, or undefined when there is none or it fails its integrity check (logged). */
  async load(): Promise<StoredPolicies | undefined> {
    const bytes = await readFileIfExists(this.path);
    if (!bytes) return undefined;
    try {
      const file = JSON.parse(new TextDecoder().decode(bytes)) as StoreFile;
      if (file.format !== FORMAT || typeof file.body !== "string") {
        throw new Error(`unknown format ${JSON.stringify(file.format)}`);
      }
      if (await sha256Hex(file.body) !== file.sha256) {
        throw new Error("its checksum does not match its content");
      }
      const body = JSON.parse(file.body) as StoreBody;
      return { policies: body.policies.map(fromStored), savedAt: new Date(body.savedAt) };
    } catch (err) {
      this.#logger.error(
        "the stored policy set is damaged and is not used; the agent waits for the server's snapshot",
        { path: this.path, error: (err as Error).message },
      );
      return undefined;
    }
  }

  /** Stores `policies` (writes are queued, so the last call wins on disk). */
  save(policies: readonly CachedPolicy[]): Promise<void> {
    const body = JSON.stringify({ savedAt: new Date().toISOString(), policies: policies.map(toStored) });
    const run = this.#writing.then(async () => {
      const file: StoreFile = { format: FORMAT, sha256: await sha256Hex(body), body };
      await writeFileAtomic(this.path, JSON.stringify(file), { mode: 0o600, dirMode: 0o700 });
    });
    this.#writing = run.catch((err) =>
      this.#logger.error("cannot store the policy set for offline restarts", {
        path: this.path,
        error: (err as Error).message,
      })
    );
    return this.#writing;
  }
}

function toStored(policy: CachedPolicy): StoredPolicy {
  const { typed, ...rest } = policy;
  if (!typed) return rest;
  if (!("case" in typed && typed.value instanceof Uint8Array)) {
    // A decoded message (tests) cannot be stored as bytes; the content JSON is enough to enforce it.
    return rest;
  }
  return { ...rest, typed: { case: typed.case, value: Buffer.from(typed.value).toString("base64") } };
}

function fromStored(stored: StoredPolicy): CachedPolicy {
  const { typed, ...rest } = stored;
  if (!typed) return rest;
  const encoded: EncodedTypedContent = {
    case: typed.case,
    value: new Uint8Array(Buffer.from(typed.value, "base64")),
  };
  return { ...rest, typed: encoded };
}
