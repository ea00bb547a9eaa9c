/** A refused agent says what to do once, repeats it only after the reminder interval, and says when it is accepted again. */
import assert from "node:assert/strict";
import { createLogger } from "../../agent/log.ts";
import { RevocationNotice } from "../../agent/revocation.ts";

Deno.test("revocation notice: once, then again only after the interval; cleared once accepted", async () => {
  const lines: string[] = [];
  const logger = createLogger({ level: "debug", sink: (line) => lines.push(line) });
  const notice = new RevocationNotice({ logger, nodeName: "pc-1", everyMs: 300 });
  const errors = () => lines.filter((l) => / ERROR /.test(l));
  for (let i = 0; i < 5; i++) notice.refused("certificate revoked", 1000);
  assert.equal(errors().length, 1);
  assert.match(errors()[0], /re-enroll node "pc-1".*Nodes → pc-1 → Re-enroll.*svc-agent --token-file FILE/);
  assert.match(errors()[0], /keeps enforcing the policies it last received/);
  assert.ok(notice.active);
  await new Promise((r) => setTimeout(r, 350));
  notice.refused("certificate revoked", 1000);
  assert.equal(errors().length, 2, "the reminder after the interval");
  notice.clear();
  assert.equal(notice.active, false);
  assert.match(lines.at(-1)!, /INFO the server accepts this node's certificate again/);
  notice.refused("certificate revoked", 1000);
  assert.equal(errors().length, 3, "a new refusal is told at once");
});
