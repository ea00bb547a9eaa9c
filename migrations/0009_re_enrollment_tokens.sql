-- Re-enrollment tokens: a token bound to one existing node (offered for a revoked node) instead of a node
-- group. Using it gives that same node record a new certificate, so its compliance history, tamper events
-- and audit trail stay attributed to it.
ALTER TABLE enrollment_tokens ALTER COLUMN node_group_id DROP NOT NULL;
ALTER TABLE enrollment_tokens ADD COLUMN node_id uuid REFERENCES nodes (id) ON DELETE CASCADE;
ALTER TABLE enrollment_tokens ADD CONSTRAINT enrollment_tokens_one_target
  CHECK ((node_group_id IS NULL) <> (node_id IS NULL));
