import assert from "node:assert/strict";
import { createLogger } from "../../agent/log.ts";
import { checkedContent, revalidate } from "../../agent/enforcers/revalidate.ts";
import { type CachedPolicy, type ItemResult, rollupMessage } from "../../agent/sync/types.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import { dconfType } from "../../shared/policy_types/dconf.ts";

const ENTRIES =
  `"entries":[{"schemaId":"org.gnome.desktop.interface","key":"gtk-theme","value":"'HighContrast'"}]`;

function policy(id: string, content: string): CachedPolicy {
  return { id, name: id, type: "Dconf", version: 1, priority: 0, content } as CachedPolicy;
}

Deno.test("revalidate: the check hook does extra work per policy and names the failure it finds", () => {
  const lines: string[] = [];
  const logger = createLogger({ sink: (line) => lines.push(line) });
  const { valid, rejected } = revalidate("Dconf", [
    policy("a", `{${ENTRIES}}`),
    policy("b", "not json"),
    policy("c", `{${ENTRIES},"dbName":"extra"}`),
  ], {
    check: (p) => {
      const message = checkedContent(p, dconfType);
      if (message.dbName === "extra") throw new PolicyContentError("db_name: refused by the extra check");
      return { message, rendered: `file of ${p.id}` };
    },
    logger,
  });
  assert.deepEqual(valid.map((v) => [v.policy.id, v.message.rendered]), [["a", "file of a"]]);
  assert.deepEqual(rejected.map((r) => [r.policyId, r.status]), [["b", "ERROR"], ["c", "ERROR"]]);
  assert.match(rejected[0].message, /^policy content rejected by the agent: ./);
  assert.equal(
    rejected[1].message,
    "policy content rejected by the agent: db_name: refused by the extra check",
  );
  assert.equal(lines.filter((l) => l.includes("Dconf policy rejected by the agent")).length, 2);
});

Deno.test("revalidate: an error that is not about content is a bug and propagates", () => {
  assert.throws(
    () =>
      revalidate("Dconf", [policy("a", "{}")], {
        check: () => {
          throw new TypeError("bug");
        },
        logger: createLogger({ sink: () => {} }),
      }),
    TypeError,
  );
});

Deno.test("rollupMessage counts the items not in effect and names the first three", () => {
  const items: ItemResult[] = ["k1", "k2", "k3", "k4", "k5"].map((key, i) => ({
    schemaId: "s",
    key,
    status: i === 0 ? "COMPLIANT" : i === 1 ? "INAPPLICABLE" : i === 2 ? "ERROR" : "NON_COMPLIANT",
    message: `why ${key}`,
  }));
  assert.equal(
    rollupMessage(items, "key(s)"),
    "3 of 5 key(s) not in effect: k3 (why k3); k4 (why k4); k5 (why k5)",
  );
  assert.equal(
    rollupMessage(items.slice(0, 3), "key(s)", (i) => `${i.schemaId} ${i.key}`),
    "1 of 3 key(s) not in effect: s k3 (why k3)",
  );
});
