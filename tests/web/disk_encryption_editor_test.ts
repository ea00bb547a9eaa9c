/**
 * The DiskEncryption editor's catalogue against the content message: every field of the policy (and of its
 * TPM2 and Tang parts) has a label, every catalogue path names a real field, and the generated form shows
 * the four sections in order with every top-level field in one of them.
 */
import assert from "node:assert/strict";
import { diskEncryptionEditor } from "../../web/src/editors/disk_encryption.ts";
import { formModel } from "../../web/src/editors/form_model.ts";
import { DiskEncryptionPolicySchema } from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";
import docsJson from "../../web/src/editors/proto_docs.gen.json" with { type: "json" };
import { catalogueGaps } from "../helpers/editor_forms.ts";

Deno.test("DiskEncryption editor: the catalogue covers every field and names no other", () => {
  assert.deepEqual(
    catalogueGaps(diskEncryptionEditor.hints.catalogue!.fieldInfo, DiskEncryptionPolicySchema),
    { unlabelled: [], noField: [] },
  );
});

Deno.test("DiskEncryption editor: requirements, recovery key, TPM2 and Tang sections in that order", () => {
  const model = formModel(
    { catalogue: diskEncryptionEditor.hints.catalogue, docs: docsJson },
    { schema: DiskEncryptionPolicySchema, value: { escrowRecoveryKey: true } },
  );
  assert.deepEqual(model.groups.map((g) => g.name), [
    "Volume requirements",
    "Recovery key",
    "TPM2 protector",
    "Tang protector",
  ]);
  assert.equal(model.total, DiskEncryptionPolicySchema.fields.length);
  assert.equal(model.configured, 1);
  const tang = model.groups.at(-1)!.fields.map((f) => f.meta.label);
  assert.deepEqual(tang, ["Tang"]);
});
