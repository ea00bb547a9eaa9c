/**
 * The admin guide covers every registered policy type: a row of "The policy types" links a page that exists, and
 * the merge-rule table lists the type under the rule its shared definition declares. A new type's page is part
 * of its declaration (docs/architecture.md, "Adding a policy type"); this is what notices a missing one.
 */
import assert from "node:assert/strict";
import { listPolicyTypes, type MergeRule } from "../../shared/policy_types/mod.ts";

const GUIDE = new URL("../../docs/admin/", import.meta.url);
const RULE_ROWS: Record<MergeRule, string> = {
  priority_merge: "merged by priority",
  file_per_policy: "one file per policy",
  union: "union",
};

/** The rows of the markdown table that follows `heading`'s header row, as cells. */
function tableRows(text: string, firstHeaderCell: string): string[][] {
  const lines = text.split("\n");
  const start = lines.findIndex((l) => l.startsWith(`| ${firstHeaderCell} `));
  assert.ok(start >= 0, `docs/admin/README.md has a table headed "${firstHeaderCell}"`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(line.split("|").slice(1, -1).map((c) => c.trim()));
  }
  return rows;
}

const names = (cell: string) => cell.replace(/\([^)]*\)/g, "").split(",").map((n) => n.trim());

Deno.test("every registered policy type has its page in the admin guide and its merge rule stated", async () => {
  const text = await Deno.readTextFile(new URL("README.md", GUIDE));
  const pages = tableRows(text, "Type");
  const rules = tableRows(text, "Merge rule");
  for (const def of listPolicyTypes()) {
    const row = pages.find(([types]) => names(types).includes(def.wireName));
    assert.ok(row, `docs/admin/README.md "The policy types" has no row for ${def.wireName}`);
    const link = /\]\(([^)]+)\)/.exec(row[1])?.[1];
    assert.ok(link, `the ${def.wireName} row links its page`);
    await Deno.stat(new URL(link, GUIDE)); // throws NotFound for a page that does not exist
    const rule = rules.find(([name]) => name === RULE_ROWS[def.merge]);
    assert.ok(
      rule && names(rule[1]).includes(def.wireName),
      `${def.wireName} is listed as "${RULE_ROWS[def.merge]}"`,
    );
  }
});
