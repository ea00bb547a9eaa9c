/**
 * The agent gives its runtime's cold pages back once quiet (agent/cold_pages.ts): in a process running its
 * own copy of the runtime executable (as the package installs it), the executable's resident pages drop
 * after the advice; and the daemon gives that advice after a sync followed by a quiet spell.
 */
import { enrolledDataDir } from "./helpers.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { dbTest } from "../helpers/db.ts";
import { createGroup, enrollAgent, startAgentServer } from "../helpers/agents.ts";
import { buildAgentConfig } from "../../agent/config.ts";
import { runDaemon } from "../../agent/daemon.ts";
import { createLogger } from "../../agent/log.ts";

const COLD_PAGES = new URL("../../agent/cold_pages.ts", import.meta.url).href;

Deno.test("cold pages: the executable's resident pages drop after the advice", async () => {
  const base = await Deno.makeTempDir({ prefix: "svc-cold-pages-" });
  try {
    // A private copy: pages of a file other processes map too (every test process runs this runtime) are
    // left alone by the kernel, as they should be.
    const runtime = join(base, "deno");
    await Deno.copyFile(Deno.execPath(), runtime);
    const script = join(base, "release.ts");
    await Deno.writeTextFile(
      script,
      `import "node:http2"; import "node:tls"; import "node:crypto";
       import { releaseColdRuntimePages } from ${JSON.stringify(COLD_PAGES)};
       console.log(JSON.stringify(releaseColdRuntimePages()));`,
    );
    const out = await new Deno.Command(runtime, {
      args: ["run", "-A", "--no-config", "--quiet", script],
      env: { NO_COLOR: "1" },
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const released = JSON.parse(text);
    assert.ok(released, "the advice was given (FFI and madvise available)");
    assert.ok(released.beforeKiB > 8 * 1024, `executable resident before: ${released.beforeKiB} KiB`);
    assert.ok(
      released.afterKiB < released.beforeKiB / 2,
      `resident ${released.beforeKiB} → ${released.afterKiB} KiB: at least half given back`,
    );
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});

dbTest("cold pages: the daemon gives them back after a sync and a quiet spell", async (db) => {
  const base = await Deno.makeTempDir({ prefix: "svc-cold-daemon-" });
  const server = await startAgentServer(db);
  const abort = new AbortController();
  let daemon: Promise<void> | undefined;
  const lines: string[] = [];
  try {
    const group = await createGroup(db, "desks");
    const agent = await enrollAgent(server, { name: "pc-cold", groupId: group });
    agent.close();
    const dataDir = await enrolledDataDir(base, agent, server);
    const root = join(base, "node");
    await Deno.mkdir(root);
    const { config } = buildAgentConfig({
      server: { address: "localhost", policy_port: server.policyPort },
      agent: { client_id: "pc-cold", root_dir: root },
      enrollment: { data_dir: dataDir },
    }, "test");
    const logger = createLogger({ level: "debug", sink: (line) => lines.push(line) });
    daemon = runDaemon({ config, logger, signal: abort.signal, enforcers: [], coldPagesQuietMs: 200 });

    const deadline = Date.now() + 90_000;
    while (!lines.some((l) => l.includes("released cold runtime pages")) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const syncAt = lines.findIndex((l) => l.includes("sync done"));
    const releaseAt = lines.findIndex((l) => l.includes("released cold runtime pages"));
    assert.ok(syncAt >= 0, `a sync was logged:\n${lines.join("\n")}`);
    assert.ok(releaseAt > syncAt, `pages were given back after the sync:\n${lines.join("\n")}`);
  } finally {
    abort.abort();
    await daemon?.catch(() => {});
    await server.stop();
    await Deno.remove(base, { recursive: true });
  }
});
