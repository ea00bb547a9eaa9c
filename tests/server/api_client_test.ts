/** The generated REST client matches the route declarations of this build (run deno task api:client). */
import assert from "node:assert/strict";
import {
  API_CLIENT_PATH,
  currentApiDocument,
  renderApiClient,
  tsType,
} from "../../server/tools/api_client_gen.ts";

Deno.test("shared/api/svc_api.gen.ts is generated from the current routes", async () => {
  const committed = await Deno.readTextFile(API_CLIENT_PATH);
  assert.ok(
    committed === renderApiClient(currentApiDocument()),
    "the client is stale: run deno task api:client",
  );
});

Deno.test("JSON schemas become the TypeScript types a caller must satisfy", () => {
  assert.equal(tsType({ type: ["string", "null"], format: "date-time" }), "string | null");
  assert.equal(tsType({ type: "string", enum: ["draft", "released"] }), '"draft" | "released"');
  assert.equal(
    tsType({
      type: "object",
      required: ["name"],
      properties: { name: { type: "string" }, "x-y": { type: "integer" } },
    }),
    '{\n  name: string;\n  "x-y"?: number;\n}',
  );
  assert.equal(tsType({ type: "array", items: { type: "boolean" } }), "Array<boolean>");
  assert.equal(
    tsType({ type: "object", additionalProperties: { type: "string" } }),
    "Record<string, string>",
  );
  assert.equal(tsType({ $ref: "#/components/schemas/Error" }), "ApiErrorBody");
});
