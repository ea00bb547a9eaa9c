/**
 * argon2id itself (WASM, so it also works in a compiled binary), apart from the password rules: this is the
 * part that runs in an off-loop worker (`server/core/offloop.ts`, in the password lane). One hash or check takes 60–100 ms of a
 * processor, all of it inside one WASM call; on the server's thread that held up every other request and
 * every agent stream for as long, at every login, step-up and password change.
 * Parameters follow the OWASP baseline for argon2id: 19 MiB of memory, 2 passes, 1 lane.
 */
import { argon2id, argon2Verify } from "hash-wasm";
import { defineOffLoopJob } from "../core/offloop.ts";

const PARAMS = { parallelism: 1, iterations: 2, memorySize: 19456, hashLength: 32 } as const;

/** `password` hashed with a fresh random salt, in the PHC string form (`$argon2id$v=19$m=…`). */
export async function argon2idHash(password: string): Promise<string> {
  const salt = crypto.getRandomValues(new Uint8Array(16));
  return await argon2id({ password, salt, ...PARAMS, outputType: "encoded" });
}

/** Whether `password` matches the PHC string `hash`; false for a hash that does not decode. */
export async function argon2idVerify(password: string, hash: string): Promise<boolean> {
  try {
    return await argon2Verify({ password, hash });
  } catch {
    return false;
  }
}

/** {@link argon2idHash} in an off-loop worker: the PHC string. */
export const argon2idHashOffLoop: (input: { password: string }) => Promise<string> = defineOffLoopJob(
  "password-hash",
  (job: { password: string }) => argon2idHash(job.password),
  { lane: "password" },
);

/** {@link argon2idVerify} in an off-loop worker. */
export const argon2idVerifyOffLoop: (input: { password: string; hash: string }) => Promise<boolean> =
  defineOffLoopJob(
    "password-verify",
    (job: { password: string; hash: string }) => argon2idVerify(job.password, job.hash),
    { lane: "password" },
  );
