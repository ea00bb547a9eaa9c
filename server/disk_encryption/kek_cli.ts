/**
 * `svc-server kek …`: creating and extending a key-encryption key file without a running server.
 *
 *   svc-server kek generate FILE [--for ca|disk-encryption]   new file with one random key (mode 0600;
 *                                                              refuses to overwrite)
 *   svc-server kek add FILE [--for ca|disk-encryption]        put a new current key first; older keys stay to
 *                                                              open older seals
 *
 * The same file format serves two settings, and the next steps differ: `ca.key_encryption_key_file` seals the
 * server's secrets in the database (every replica needs the same file; a start re-seals them under a new key),
 * `disk_encryption.kek_file` seals escrowed recovery keys (after `add`, `POST
 * /api/v1/disk-encryption/kek/rewrap` re-wraps every data key). `--for` names which one the file is for, so the
 * command names the right setting and steps; without it both are named.
 *
 * @module
 */
import { addKekToFile, createKekFile } from "../pki/envelope.ts";

const USAGE = "usage: svc-server kek generate|add FILE [--for ca|disk-encryption]";

/** What a key file is for. */
type Purpose = "ca" | "disk-encryption";

const SETTING: Record<Purpose, string> = {
  "ca": "ca.key_encryption_key_file",
  "disk-encryption": "disk_encryption.kek_file",
};

const SEALS: Record<Purpose, string> = {
  "ca": "the CA key, session secret and TOTP key kept in the database",
  "disk-encryption": "escrowed disk recovery keys",
};

function generated(file: string, purpose: Purpose | undefined): string {
  const created = `created ${file} (mode 0600)`;
  if (purpose === "ca") {
    return `${created}; set ${SETTING.ca} to it (it seals ${SEALS.ca}), give every replica the same file, ` +
      "and keep a copy offline";
  }
  if (purpose === "disk-encryption") {
    return `${created}; set ${SETTING["disk-encryption"]} to it (it seals ${SEALS["disk-encryption"]}) and ` +
      "keep a copy offline";
  }
  return `${created}; set ${SETTING.ca} to it when it is to seal ${SEALS.ca}, or ` +
    `${SETTING["disk-encryption"]} when it is to seal ${
      SEALS["disk-encryption"]
    } (--for ca|disk-encryption ` +
    "names one); keep a copy offline";
}

function added(file: string, id: string, purpose: Purpose | undefined): string {
  const head = `added KEK ${id} to ${file}`;
  const ca =
    `copy the file to every replica and restart them (each start seals ${SEALS.ca} again under the ` +
    "new key), then remove the old line";
  const disk = "POST /api/v1/disk-encryption/kek/rewrap (permission settings:edit), then remove the old line";
  if (purpose === "ca") return `${head}; now ${ca}`;
  if (purpose === "disk-encryption") return `${head}; now ${disk}`;
  return `${head}; as ${SETTING.ca}: ${ca}; as ${SETTING["disk-encryption"]}: ${disk}`;
}

/** Runs the command; returns the process exit code. */
export async function runKekCommand(args: string[]): Promise<number> {
  const [verb, file, ...rest] = args;
  let purpose: Purpose | undefined;
  if (rest.length === 2 && rest[0] === "--for" && (rest[1] === "ca" || rest[1] === "disk-encryption")) {
    purpose = rest[1];
  } else if (rest.length > 0) {
    console.error(USAGE);
    return 2;
  }
  if (!file || file.startsWith("--") || (verb !== "generate" && verb !== "add")) {
    console.error(USAGE);
    return 2;
  }
  try {
    if (verb === "generate") {
      await createKekFile(file);
      console.log(generated(file, purpose));
    } else {
      console.log(added(file, await addKekToFile(file), purpose));
    }
    return 0;
  } catch (err) {
    console.error(`svc-server kek ${verb}: ${(err as Error).message}`);
    return 1;
  }
}
