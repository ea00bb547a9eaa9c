/**
 * The hub gives freed native memory back to the system after activity, at most once per interval, and never
 * without activity (server/hub/memory_trim.ts). What that saves is measured by bench/stream_memory.ts.
 */
import assert from "node:assert/strict";
import { createLogger } from "../../server/core/log.ts";
import { createMemoryTrim } from "../../server/hub/memory_trim.ts";

Deno.test("freed native memory is given back after activity, once per interval", () => {
  const lines: string[] = [];
  const trim = createMemoryTrim(createLogger("debug", (l) => lines.push(l)), { intervalMs: 0 });
  const trims = () => lines.filter((l) => l.includes("freed native memory given back")).length;
  try {
    assert.equal(
      lines.filter((l) => l.includes("not given back")).length,
      0,
      "glibc's malloc_trim loads here",
    );
    trim.tick(0);
    assert.equal(trims(), 0, "nothing happened since the start: no trim");
    trim.tick(5);
    assert.equal(trims(), 1);
    trim.tick(5);
    assert.equal(trims(), 1, "no activity since the last trim");
    trim.tick(9);
    assert.equal(trims(), 2);
  } finally {
    trim.close();
  }
  const spaced = createMemoryTrim(createLogger("debug", (l) => lines.push(l)), { intervalMs: 3_600_000 });
  try {
    spaced.tick(1);
    assert.equal(trims(), 2, "the interval has not passed since the trimmer started");
  } finally {
    spaced.close();
  }
});
