/**
 * Tamper watch with the real sync engine, Firefox enforcer and inotify on a temp root: external
 * edits are restored within seconds and reported with the processes holding the file; the
 * agent's own writes are not reported; nothing is watched without managed files. Also the
 * /proc scan on a real process.
 */
import assert from "node:assert/strict";
import { findFileHolders } from "../../agent/procs.ts";
import { type TamperEvent } from "../../agent/tamper.ts";
import type { Enforcer } from "../../agent/sync/types.ts";
import { firefoxPolicy, tempNode, watchedEngine } from "./helpers.ts";

const POLICIES_JSON = "/etc/firefox/policies/policies.json";

async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Starts `sleep` holding `path` open on fd 3; resolves once it runs. */
async function holdOpen(path: string): Promise<Deno.ChildProcess> {
  const child = new Deno.Command("sh", {
    args: ["-c", 'exec 3<"$0"; echo ready; exec sleep 30', path],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  assert.equal(new TextDecoder().decode(value).trim(), "ready");
  reader.releaseLock();
  return child;
}

async function stop(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGKILL");
  } catch { /* gone */ }
  await child.status;
  await child.stdout.cancel().catch(() => {});
}

Deno.test("/proc scan finds a process holding a file, with pid, command and user", async () => {
  const dir = await Deno.makeTempDir();
  const file = `${dir}/held.json`;
  await Deno.writeTextFile(file, "{}");
  const child = await holdOpen(file);
  try {
    const holders = await findFileHolders(await Deno.realPath(file));
    const sleeper = holders.find((h) => h.pid === child.pid);
    assert.ok(sleeper, JSON.stringify(holders));
    assert.equal(sleeper.comm, "sleep");
    const me = await new Deno.Command("id", { args: ["-un"], stdout: "piped" }).output();
    assert.equal(sleeper.user, new TextDecoder().decode(me.stdout).trim());
    assert.deepEqual(await findFileHolders(`${dir}/not-held`), []);
  } finally {
    await stop(child);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an external edit is restored within seconds, reported with its holders, then compliance again", async () => {
  const node = await tempNode();
  const events: TamperEvent[] = [];
  let reportsAtTamper = -1;
  let reportCount = 0;
  let holder: Deno.ChildProcess | undefined;
  const { engine, reports, watcher } = await watchedEngine(node, {
    extra: {
      reportCompliance: () => {
        reportCount++;
        return Promise.resolve();
      },
    },
    onTamper: (event, engine) =>
      engine.requestSync(() => {
        events.push(event);
        reportsAtTamper = reportCount;
        return Promise.resolve();
      }),
  });
  try {
    assert.deepEqual(watcher.watchedPaths(), [], "nothing watched before any sync");
    const p = firefoxPolicy({ disableTelemetry: true });
    engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
    await engine.idle();
    assert.deepEqual(watcher.watchedPaths(), [POLICIES_JSON]);
    const path = `${node.root}${POLICIES_JSON}`;
    const managedText = await Deno.readTextFile(path);
    assert.equal(reportCount, 1);

    // The agent's own rewrite (a new snapshot with a change) is not a tamper event.
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: { ...firefoxPolicy({ disableTelemetry: false }, { id: p.id }) },
      snapshotComplete: true,
    });
    await engine.idle();
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(events.length, 0, "own writes are ignored");
    engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
    await engine.idle();
    await new Promise((r) => setTimeout(r, 2100));
    assert.equal(events.length, 0);
    const before = reportCount;

    holder = await holdOpen(path);
    const started = Date.now();
    await Deno.writeTextFile(path, '{"policies": {"DisableTelemetry": false}}');
    await waitFor(
      async () => (await Deno.readTextFile(path)) === managedText,
      5000,
      "the file to be restored",
    );
    const restoreMs = Date.now() - started;
    await engine.idle();
    assert.ok(restoreMs < 5000, `restored after ${restoreMs} ms`);
    assert.equal(events.length, 1);
    assert.equal(events[0].path, POLICIES_JSON);
    assert.equal(events[0].type, "Firefox");
    assert.ok(events[0].processes.some((proc) => proc.pid === holder!.pid && proc.comm === "sleep"));
    assert.equal(reportsAtTamper, before, "tamper report goes out before the compliance reports");
    assert.equal(reportCount, before + 1, "compliance reported again after the restore");
    assert.equal(reports.size, 0, "reports went to the custom reporter");

    // The last policy leaves: nothing managed, nothing watched.
    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    assert.deepEqual(watcher.watchedPaths(), []);
  } finally {
    if (holder) await stop(holder);
    await watcher.close();
    await engine.idle();
    await node.cleanup();
  }
});

Deno.test("deleting a managed file is noticed and it comes back", async () => {
  const node = await tempNode({ original: null });
  const { engine, watcher, events } = await watchedEngine(node);
  try {
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: firefoxPolicy({ blockAboutConfig: true }),
      snapshotComplete: true,
    });
    await engine.idle();
    await new Promise((r) => setTimeout(r, 400));
    const path = `${node.root}${POLICIES_JSON}`;
    await Deno.remove(path);
    await waitFor(
      async () => {
        try {
          return JSON.parse(await Deno.readTextFile(path)).policies.BlockAboutConfig === true;
        } catch {
          return false;
        }
      },
      5000,
      "the deleted file to come back",
    );
    await engine.idle();
    assert.equal(events.length, 1);
  } finally {
    await watcher.close();
    await node.cleanup();
  }
});

Deno.test("a file whose restore keeps failing is reported once per change, not in a loop", async () => {
  const node = await tempNode({ original: null });
  await Deno.mkdir(`${node.root}/etc`, { recursive: true });
  let syncs = 0;
  const flaky: Enforcer = {
    type: "Flaky",
    notifiesUsers: false,
    async sync(policies, io) {
      syncs++;
      if (syncs > 1) throw new Error("disk full");
      const changed = (await io.writeManaged("/etc/flaky.conf", "managed\n")) ? ["/etc/flaky.conf"] : [];
      return {
        changed,
        policies: policies.map((p) => ({ policyId: p.id, status: "COMPLIANT", message: "", items: [] })),
      };
    },
  };
  const { engine, watcher, events } = await watchedEngine(node, {
    extra: { enforcers: new Map([["Flaky", flaky]]) },
    settleMs: 100,
  });
  try {
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: { id: "f", name: "f", type: "Flaky", version: 1, priority: 0, content: "{}" },
      snapshotComplete: true,
    });
    await engine.idle();
    await Deno.writeTextFile(`${node.root}/etc/flaky.conf`, "edited\n");
    await waitFor(() => events.length === 1, 10_000, "the tamper event");
    // Sweeps after the failed restore must not start another round: give them many quiet periods.
    await new Promise((r) => setTimeout(r, 1500));
    await engine.idle();
    assert.equal(events.length, 1);
    assert.equal(syncs, 2, "one restore attempt");
    // A new change is a new event.
    await Deno.writeTextFile(`${node.root}/etc/flaky.conf`, "edited again\n");
    await waitFor(() => events.length === 2, 10_000, "the second tamper event");
  } finally {
    await watcher.close();
    await engine.idle();
    await node.cleanup();
  }
});
