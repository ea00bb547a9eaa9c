/**
 * The agent's workaround for Deno's node:http2 client crash (agent/client.ts, docs/upstream/): the upstream
 * reproduction, which kills its client within its first hundred sessions (a session closed from its 'goaway'
 * listener, then a garbage collection), runs its client with the workaround in place and must survive every round.
 * glibc fills freed memory (MALLOC_PERTURB_), so any use of a freed session crashes at once instead of going
 * unnoticed (without the workaround even the runtime's own close after the listeners does). Each round waits for
 * the session's 'close', so a close the workaround dropped would hang it (the safety timeout then fails it).
 */
import assert from "node:assert/strict";

const FIXTURE = new URL("./fixtures/http2_goaway_guarded_client.ts", import.meta.url).pathname;
const ROUNDS = 600;

Deno.test("sessions closed from their 'goaway' listener under GC pressure do not kill the agent's runtime", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", FIXTURE, String(ROUNDS)],
    env: { MALLOC_PERTURB_: "165" },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(300_000),
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.equal(out.signal, null, `the client died by ${out.signal}:\n${text.slice(-2000)}`);
  assert.equal(out.code, 0, text.slice(-2000));
  assert.match(text, new RegExp(`survived ${ROUNDS} rounds`));
});
