/**
 * The Certificates and Proxy types are labelled like every policy type in `svc_policies_total` (the wire name
 * as the `type` label), rendered in both exposition formats.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createLogger } from "../../server/core/log.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { render } from "../../server/metrics/exposition.ts";

dbTest("metrics: Certificates and Proxy policies are counted under their wire names", async (db) => {
  for (const [name, type, state] of [["trust", "Certificates", "released"], ["proxy", "Proxy", "draft"]]) {
    await db.query("INSERT INTO policies (name, type, content, state) VALUES ($1, $2, '{}', $3)", [
      name,
      type,
      state,
    ]);
  }
  const families = await collectDatabaseFamilies(db, createLogger("error"));
  for (const format of ["text", "openmetrics"] as const) {
    const text = render(families, format);
    assert.match(text, /^svc_policies_total\{state="released",type="Certificates"\} 1$/m, format);
    assert.match(text, /^svc_policies_total\{state="draft",type="Proxy"\} 1$/m, format);
  }
});
