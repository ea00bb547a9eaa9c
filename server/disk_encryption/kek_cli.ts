/**
 * `svc-server kek …`: creating and extending the key-encryption key file without a running server.
 *
 *   svc-server kek generate FILE   new file with one random key (mode 0600; refuses to overwrite)
 *   svc-server kek add FILE        put a new current key first; older keys stay to open older seals
 *
 * After `add`, `POST /api/v1/disk-encryption/kek/rewrap` (permission settings:edit) re-wraps every data key
 * with the new key; then the old line can be removed.
 *
 * @module
 */
import { addKekToFile, createKekFile } from "./envelope.ts";

const USAGE = "usage: svc-server kek generate FILE | svc-server kek add FILE";

/** Runs the command; returns the process exit code. */
export async function runKekCommand(args: string[]): Promise<number> {
  const [verb, file, ...rest] = args;
  if (!file || rest.length > 0 || (verb !== "generate" && verb !== "add")) {
    console.error(USAGE);
    return 2;
  }
  try {
    if (verb === "generate") {
      await createKekFile(file);
      console.log(`created ${file} (mode 0600); set disk_encryption.kek_file to it and keep a copy offline`);
    } else {
      const id = await addKekToFile(file);
      console.log(
        `added KEK ${id} to ${file}; now POST /api/v1/disk-encryption/kek/rewrap, then remove the old line`,
      );
    }
    return 0;
  } catch (err) {
    console.error(`svc-server kek ${verb}: ${(err as Error).message}`);
    return 1;
  }
}
