/**
 * A new policy type is one declaration: its typed_content member in policy.proto and its modules in the rooms.
 * `deno task proto` (proto/policy_registries.ts) writes the shared, agent and console registries from them, so
 * no registry is edited by hand and the wire name is written once, in the shared module.
 */
import assert from "node:assert/strict";
import { oneofMembers } from "../../proto/policy_registries.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test("the oneof is read in order, and a member that does not follow the naming is refused by name", () => {
  const members = oneofMembers(`message Policy {\n  oneof typed_content {
    FirefoxPolicy firefox_policy = 12; // a comment
    SessionAccessPolicy session_access_policy = 20;
  }\n}`);
  assert.deepEqual(members.map((m) => [m.message, m.field, m.number]), [
    ["FirefoxPolicy", "firefox_policy", 12],
    ["SessionAccessPolicy", "session_access_policy", 20],
  ]);
  assert.throws(
    () => oneofMembers("oneof typed_content {\n  FooPolicy foo = 3;\n}"),
    /typed_content member foo must be named <type>_policy/,
  );
  assert.throws(() => oneofMembers("message X {}"), /no "oneof typed_content/);
});

async function run(cwd: string, args: string[]): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const text = new TextDecoder();
  return { code, out: text.decode(stdout) + text.decode(stderr) };
}

async function copyTree(from: string, to: string): Promise<void> {
  const { code, stderr } = await new Deno.Command("cp", { args: ["-a", from, to], stderr: "piped" }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
}

Deno.test("adding a type: one oneof line and its modules reach every registry, with no registry edited", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-new-type-" });
  try {
    for (const part of ["proto", "shared", "agent", "deno.json", "deno.lock"]) {
      await copyTree(`${ROOT}${part}`, dir);
    }
    await Deno.mkdir(`${dir}/web/src`, { recursive: true });
    await copyTree(`${ROOT}web/src/editors`, `${dir}/web/src`);
    await Deno.mkdir(`${dir}/web/src/components`);
    await Deno.symlink(`${ROOT}node_modules`, `${dir}/node_modules`);

    // The declaration: one member (reusing an existing message keeps protoc out of the test), a shared module,
    // an enforcer and an editor. The wire name appears only in the shared module.
    const proto = `${dir}/proto/svc/policy/v1/policy.proto`;
    const text = await Deno.readTextFile(proto);
    await Deno.writeTextFile(
      proto,
      text.replace(
        /(\n {4}KconfigPolicy kconfig_policy = 21;\n)/,
        "$1    KconfigPolicy example_widget_policy = 99;\n",
      ),
    );
    await Deno.writeTextFile(
      `${dir}/shared/policy_types/example_widget.ts`,
      `import { KconfigPolicySchema } from "../gen/svc/policy/v1/kconfig_pb.ts";
import { defineType } from "./define.ts";
export const exampleWidgetType = defineType({
  wireName: "ExampleWidget",
  label: "Example widgets",
  description: "A type added by a test.",
  schema: KconfigPolicySchema,
  typedContentCase: "exampleWidgetPolicy",
  merge: "priority_merge",
  names: "proto",
  check: () => {},
});
`,
    );
    await Deno.writeTextFile(
      `${dir}/agent/enforcers/example_widget.ts`,
      `import { exampleWidgetType } from "../../shared/policy_types/example_widget.ts";
import type { Enforcer } from "../sync/types.ts";
export const exampleWidgetEnforcer: Enforcer = {
  type: exampleWidgetType.wireName,
  notifiesUsers: true,
  background: true,
  sync: () => Promise.resolve({ results: [] }),
};
`,
    );
    await Deno.writeTextFile(
      `${dir}/web/src/editors/example_widget.ts`,
      `import type { EditorSpec } from "./spec.ts";\nexport const exampleWidgetEditor: EditorSpec = { hints: {} };\n`,
    );

    const generated = await run(dir, ["run", "-A", "proto/policy_registries.ts"]);
    assert.equal(generated.code, 0, generated.out);
    const probe = await run(dir, [
      "eval",
      `import { listPolicyTypes } from "./shared/policy_types/mod.ts";
       import { ENFORCERS } from "./agent/enforcers/mod.ts";
       import { EDITORS } from "./web/src/editors/registry.gen.ts";
       const agent = ENFORCERS.find((e) => e.type === "ExampleWidget");
       console.log(JSON.stringify({
         shared: listPolicyTypes().map((t) => t.wireName),
         agent: agent && { notifies: agent.notifiesUsers, background: agent.background, loaded: agent.loaded() },
         editor: EDITORS.has("ExampleWidget"),
       }));`,
    ]);
    assert.equal(probe.code, 0, probe.out);
    const seen = JSON.parse(probe.out.trim().split("\n").at(-1)!);
    // After Kconfig, where the member was declared; the agent knows its traits without loading the module.
    assert.equal(seen.shared[seen.shared.indexOf("Kconfig") + 1], "ExampleWidget");
    assert.deepEqual(seen.agent, { notifies: true, background: true, loaded: false });
    assert.equal(seen.editor, true);
    const agentRegistry = await Deno.readTextFile(`${dir}/agent/enforcers/registry.gen.ts`);
    assert.match(agentRegistry, /lazy\("ExampleWidget", \(\) => import\("\.\/example_widget\.ts"\)/);

    // A member without its shared module is refused, naming the file to write.
    await Deno.remove(`${dir}/shared/policy_types/example_widget.ts`);
    const refused = await run(dir, ["run", "-A", "proto/policy_registries.ts", "--check"]);
    assert.notEqual(refused.code, 0);
    assert.match(
      refused.out,
      /declares example_widget_policy but shared\/policy_types\/example_widget\.ts does not exist/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the committed registries are what the declarations make", async () => {
  const checked = await run(ROOT, ["run", "-A", "proto/policy_registries.ts", "--check"]);
  assert.equal(checked.code, 0, checked.out);
});
