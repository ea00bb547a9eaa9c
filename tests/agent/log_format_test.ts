/** The agent's optional JSON log format (`log.format: json`): configuration, and one JSON object per line. */
import assert from "node:assert/strict";
import { buildAgentConfig } from "../../agent/config.ts";
import { createLogger } from "../../agent/log.ts";

Deno.test("log.format: text by default, json when set, anything else refused naming the choices", () => {
  const base = { agent: { client_id: "n1" } };
  assert.equal(buildAgentConfig(base, "a.yaml").config.log.format, "text");
  assert.equal(buildAgentConfig({ ...base, log: { format: "json" } }, "a.yaml").config.log.format, "json");
  assert.throws(
    () => buildAgentConfig({ ...base, log: { format: "xml" } }, "a.yaml"),
    /log\.format in a\.yaml must be one of text, json/,
  );
});

Deno.test("json lines carry time, level, message and the details", () => {
  const lines: string[] = [];
  const logger = createLogger({ format: "json", sink: (l) => lines.push(l) });
  logger.debug("dropped below the level");
  logger.info("sync done", {
    policies: 2,
    written: "/etc/x",
    error: new Error("boom"),
    level: "clash",
    u: undefined,
  });
  assert.equal(lines.length, 1);
  const parsed = JSON.parse(lines[0]);
  assert.ok(!Number.isNaN(Date.parse(parsed.time)));
  assert.deepEqual({ ...parsed, time: undefined }, {
    time: undefined,
    level: "info",
    msg: "sync done",
    policies: 2,
    written: "/etc/x",
    error: "boom",
    level_: "clash",
  });
});
