/** Reconnect backoff: 1 s doubling to 60 s, reset after a healthy stream. */
import assert from "node:assert/strict";
import { Backoff, sleep } from "../../agent/backoff.ts";

Deno.test("backoff schedule is 1, 2, 4, … seconds capped at 60", () => {
  const backoff = new Backoff();
  const delays = Array.from({ length: 9 }, () => backoff.next());
  assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
});

Deno.test("reset starts over at 1 s", () => {
  const backoff = new Backoff();
  for (let i = 0; i < 10; i++) backoff.next();
  backoff.reset();
  assert.deepEqual([backoff.next(), backoff.next()], [1000, 2000]);
});

Deno.test("custom bounds", () => {
  const backoff = new Backoff({ initialMs: 50, maxMs: 150 });
  assert.deepEqual([backoff.next(), backoff.next(), backoff.next(), backoff.next()], [50, 100, 150, 150]);
});

Deno.test("sleep ends early when aborted", async () => {
  const abort = new AbortController();
  const started = performance.now();
  const pending = sleep(10_000, abort.signal);
  setTimeout(() => abort.abort(), 20);
  await pending;
  assert.ok(performance.now() - started < 1000);
});
