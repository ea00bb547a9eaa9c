/** The hand-written duplicates measure leaves out generated code and catalogue data, and only that. */
import assert from "node:assert/strict";
import { isHandWritten, selectPaths } from "../../server/tools/duplicates_hand.ts";

Deno.test("generated code and the browser catalogue do not count as hand-written", () => {
  for (
    const path of [
      "shared/api/svc_api.gen.ts",
      "server/http/spa_assets.gen.ts",
      "shared/gen/svc/policy/v1/policy_pb.ts",
      "agent/gen/svc/policy/v1/policy_pb.ts",
      "proto/generate.sh",
      "shared/policy_types/browser_catalogue/chrome.ts",
    ]
  ) assert.equal(isHandWritten(path), false, path);
  for (
    const path of [
      "server/tools/api_client_gen.ts",
      "shared/policy_types/chrome.ts",
      "shared/gvariant.ts",
      "packaging/gen_polkit_catalogue.ts",
      "agent/catalogue.ts",
    ]
  ) assert.equal(isHandWritten(path), true, path);
});

Deno.test("--only keeps paths under a prefix, --skip drops them", () => {
  const paths = [
    "tests/e2e/a_test.ts",
    "tests/e2e/booted_node_x_test.ts",
    "server/x.ts",
    "shared/gen/y_pb.ts",
  ];
  assert.deepEqual(selectPaths(paths), [
    "tests/e2e/a_test.ts",
    "tests/e2e/booted_node_x_test.ts",
    "server/x.ts",
  ]);
  assert.deepEqual(
    selectPaths(paths, { only: ["tests/", "shared/"], skip: ["tests/e2e/booted_node"] }),
    ["tests/e2e/a_test.ts"],
  );
});
