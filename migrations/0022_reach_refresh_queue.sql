-- Binding and policy changes no longer write the reach model inside the admin's transaction (issue 36).
--
-- Until now the triggers of 0015/0017 wrote one policy_reach row (and one counter update) per reached node
-- inside the transaction that enabled, disabled or archived: 2.9 s for a binding that reaches 5,000 nodes, about
-- a minute at 100,000, with the binding's group lock and every reached node's counter row held throughout, so
-- enrollments into the group, reports of those nodes and the next admin change all waited.
--
-- Now:
-- - A binding or policy state change whose policy has at most `svc.reach_inline_nodes` candidate nodes
--   (default 500; a setting so a test can force the queue) refreshes them in its own transaction, as before:
--   small changes stay exact at commit. A larger one writes one row into reach_refresh_queue (the outbox) and
--   notifies `svc_read_models`; it commits in milliseconds whatever the fleet's size.
-- - Workers (server/hub/read_model_worker.ts, one in every replica's main process) take queue rows with
--   FOR UPDATE SKIP LOCKED and refresh the policy's pairs a batch of nodes at a time, each batch its own short
--   transaction that moves the row's keyset cursor (after_node) and deletes the row after the last batch. A
--   batch recomputes its nodes' pairs from the binding tables (absolute, not deltas), so running it twice, or
--   after a crash rolled a batch back, changes nothing: the queue is idempotent and restart-safe.
-- - A membership change refreshes its nodes in its own transaction, a statement at a time (enrollment is one
--   node; this was a row trigger with path deltas).
-- - node_compliance_counts still follows policy_reach row by row in the same transactions (0017), so the
--   counters always equal the pairs stored; only policy_reach lags the binding tables, by the queue's backlog
--   (svc_read_model_pending_changes, svc_read_model_lag_seconds). Reads that must be exact compute from the
--   binding tables instead (server/domain/reach.ts says which).
--
-- Concurrency (READ COMMITTED; every statement of a function reads in a fresh snapshot). A refresh of nodes N
-- first locks N's rows in nodes (KEY SHARE: a node being deleted is skipped, and cannot go while its pairs are
-- written) and their counter rows (FOR UPDATE), in node order, then reads. Two refreshes of one node therefore
-- run one after the other, and the second reads everything the first committed. What remains is the race of a
-- membership change against a binding or policy change that it does not see: the advisory locks of 0015 stay
-- (class 22015: node group, 22016: policy), so one of the two commits first and the other reads it:
--   membership change of group g     shared g
--   binding change of policy p, g    shared p, then exclusive g
--   policy state change of p         exclusive p, then exclusive every group with an enabled binding of p
-- A queued refresh reads after the change that queued it committed (the row is invisible before), so it sees
-- that change; a change committed while its job runs queues a row of its own (or is absorbed: below).

CREATE TABLE reach_refresh_queue (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- No foreign key: a deleted policy's row still runs, and finds nothing left to reach.
  policy_id uuid NOT NULL,
  -- Keyset cursor: nodes up to this id are refreshed; NULL until the first batch commits.
  after_node uuid,
  -- When the oldest change this row stands for committed (for the lag metric).
  enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX reach_refresh_queue_policy_idx ON reach_refresh_queue (policy_id);

-- Members of a group in node order from any point, for keyset batches.
CREATE INDEX node_group_members_group_node_idx ON node_group_members (node_group_id, node_id);
DROP INDEX node_group_members_group_idx;

-- Nodes whose pair with policy `p` may need a change, in node order after `after` (NULL: from the start), at
-- most `n`: members of groups with an enabled binding of p, and nodes p reaches now. Each part reads at most n
-- rows of an index, so a batch costs the same at the fleet's end as at its start.
CREATE FUNCTION reach_candidates(p uuid, after uuid, n integer) RETURNS TABLE (node_id uuid)
LANGUAGE sql STABLE AS $$
  SELECT DISTINCT c.node_id FROM (
    SELECT x.node_id FROM policy_bindings b CROSS JOIN LATERAL (
      SELECT m.node_id FROM node_group_members m
       WHERE m.node_group_id = b.node_group_id
         AND m.node_id > coalesce(after, '00000000-0000-0000-0000-000000000000')
       ORDER BY m.node_id LIMIT n
    ) x
     WHERE b.policy_id = p AND b.state = 'enabled'
    UNION ALL
    (SELECT r.node_id FROM policy_reach r
      WHERE r.policy_id = p AND r.node_id > coalesce(after, '00000000-0000-0000-0000-000000000000')
      ORDER BY r.node_id LIMIT n)
  ) c ORDER BY 1 LIMIT n
$$;

-- Sets the pairs of nodes `ns` (of policy `p`, or of every policy when p is NULL) to their definition: a
-- released policy, an enabled binding of it to a group the node belongs to, `paths` such bindings. Returns how
-- many of the nodes exist (the others are gone or being deleted; their pairs go with them).
CREATE FUNCTION reach_refresh(p uuid, ns uuid[]) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  locked uuid[];
BEGIN
  SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO locked
    FROM (SELECT id FROM nodes WHERE id = ANY (ns) ORDER BY id FOR KEY SHARE) s;
  IF cardinality(locked) = 0 THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM node_compliance_counts WHERE node_id = ANY (locked) ORDER BY node_id FOR UPDATE;
  IF p IS NULL THEN
    DELETE FROM policy_reach r
     WHERE r.node_id = ANY (locked)
       AND NOT EXISTS (SELECT 1 FROM node_group_members m
                         JOIN policy_bindings b ON b.node_group_id = m.node_group_id AND b.state = 'enabled'
                         JOIN policies x ON x.id = b.policy_id AND x.state = 'released'
                        WHERE m.node_id = r.node_id AND b.policy_id = r.policy_id);
    INSERT INTO policy_reach AS r (policy_id, node_id, paths)
    SELECT b.policy_id, m.node_id, count(*)::int
      FROM node_group_members m
      JOIN policy_bindings b ON b.node_group_id = m.node_group_id AND b.state = 'enabled'
      JOIN policies x ON x.id = b.policy_id AND x.state = 'released'
     WHERE m.node_id = ANY (locked)
     GROUP BY b.policy_id, m.node_id
    ON CONFLICT (policy_id, node_id) DO UPDATE SET paths = excluded.paths WHERE r.paths <> excluded.paths;
  ELSE
    DELETE FROM policy_reach r
     WHERE r.policy_id = p AND r.node_id = ANY (locked)
       AND NOT EXISTS (SELECT 1 FROM node_group_members m
                         JOIN policy_bindings b ON b.node_group_id = m.node_group_id AND b.state = 'enabled'
                         JOIN policies x ON x.id = b.policy_id AND x.state = 'released'
                        WHERE m.node_id = r.node_id AND b.policy_id = p);
    INSERT INTO policy_reach AS r (policy_id, node_id, paths)
    SELECT p, m.node_id, count(*)::int
      FROM policy_bindings b
      JOIN policies x ON x.id = b.policy_id AND x.state = 'released'
      JOIN node_group_members m ON m.node_group_id = b.node_group_id
     WHERE b.policy_id = p AND b.state = 'enabled' AND m.node_id = ANY (locked)
     GROUP BY m.node_id
    ON CONFLICT (policy_id, node_id) DO UPDATE SET paths = excluded.paths WHERE r.paths <> excluded.paths;
  END IF;
  RETURN cardinality(locked);
END $$;

-- After a change of policy p's bindings or state (its locks taken): refreshes p's pairs at once when they are
-- few, otherwise queues p for the workers. An unstarted row for p that no worker holds covers this change too:
-- locking it keeps workers off it until this transaction commits, so its first batch reads this change.
CREATE FUNCTION reach_refresh_policy(p uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  inline_limit integer := coalesce(nullif(current_setting('svc.reach_inline_nodes', true), '')::integer, 500);
  ns uuid[];
BEGIN
  SELECT array_agg(node_id) INTO ns FROM reach_candidates(p, NULL, inline_limit + 1);
  IF coalesce(cardinality(ns), 0) <= inline_limit THEN
    IF ns IS NOT NULL THEN
      PERFORM reach_refresh(p, ns);
    END IF;
    RETURN;
  END IF;
  PERFORM 1 FROM reach_refresh_queue WHERE policy_id = p AND after_node IS NULL LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    INSERT INTO reach_refresh_queue (policy_id) VALUES (p);
  END IF;
  PERFORM pg_notify('svc_read_models', 'policy_reach');
END $$;

CREATE OR REPLACE FUNCTION policy_reach_binding() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  was_on boolean := TG_OP <> 'INSERT' AND OLD.state = 'enabled';
  is_on boolean := TG_OP <> 'DELETE' AND NEW.state = 'enabled';
BEGIN
  IF TG_OP = 'UPDATE' AND was_on = is_on
     AND OLD.policy_id = NEW.policy_id AND OLD.node_group_id = NEW.node_group_id THEN
    RETURN NULL;
  END IF;
  -- Every lock first, then the refreshes: each reads with both groups held.
  IF was_on THEN
    PERFORM pg_advisory_xact_lock_shared(22016, hashtext(OLD.policy_id::text));
    PERFORM pg_advisory_xact_lock(22015, hashtext(OLD.node_group_id::text));
  END IF;
  IF is_on THEN
    PERFORM pg_advisory_xact_lock_shared(22016, hashtext(NEW.policy_id::text));
    PERFORM pg_advisory_xact_lock(22015, hashtext(NEW.node_group_id::text));
  END IF;
  IF was_on THEN
    PERFORM reach_refresh_policy(OLD.policy_id);
  END IF;
  IF is_on AND NOT (was_on AND OLD.policy_id = NEW.policy_id) THEN
    PERFORM reach_refresh_policy(NEW.policy_id);
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION policy_reach_policy_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(22016, hashtext(NEW.id::text));
  PERFORM pg_advisory_xact_lock(22015, hashtext(g::text))
     FROM (SELECT DISTINCT node_group_id AS g FROM policy_bindings
            WHERE policy_id = NEW.id AND state = 'enabled' ORDER BY 1) s;
  PERFORM reach_refresh_policy(NEW.id);
  RETURN NULL;
END $$;

-- Memberships added, removed or moved by one statement: their nodes' pairs are refreshed (only when a group
-- involved has an enabled binding: no pair can change otherwise, and the group locks keep a binding from being
-- enabled unseen meanwhile).
CREATE FUNCTION policy_reach_members() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  gs uuid[];
  ns uuid[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(DISTINCT node_group_id), array_agg(DISTINCT node_id) INTO gs, ns FROM new_members;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(DISTINCT node_group_id), array_agg(DISTINCT node_id) INTO gs, ns FROM old_members;
  ELSE
    SELECT array_agg(DISTINCT node_group_id), array_agg(DISTINCT node_id) INTO gs, ns
      FROM (SELECT node_group_id, node_id FROM old_members UNION ALL
            SELECT node_group_id, node_id FROM new_members) c;
  END IF;
  IF gs IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM pg_advisory_xact_lock_shared(22015, hashtext(g::text)) FROM (SELECT g FROM unnest(gs) g ORDER BY 1) s;
  IF EXISTS (SELECT 1 FROM policy_bindings WHERE node_group_id = ANY (gs) AND state = 'enabled') THEN
    PERFORM reach_refresh(NULL, ns);
  END IF;
  RETURN NULL;
END $$;

DROP TRIGGER node_group_members_reach ON node_group_members;
DROP FUNCTION policy_reach_membership();
CREATE TRIGGER node_group_members_reach_insert AFTER INSERT ON node_group_members
  REFERENCING NEW TABLE AS new_members FOR EACH STATEMENT EXECUTE FUNCTION policy_reach_members();
CREATE TRIGGER node_group_members_reach_delete AFTER DELETE ON node_group_members
  REFERENCING OLD TABLE AS old_members FOR EACH STATEMENT EXECUTE FUNCTION policy_reach_members();
CREATE TRIGGER node_group_members_reach_update AFTER UPDATE ON node_group_members
  REFERENCING OLD TABLE AS old_members NEW TABLE AS new_members
  FOR EACH STATEMENT EXECUTE FUNCTION policy_reach_members();

-- Counters are updated in place by every report and reach change: with room left in each page, PostgreSQL
-- keeps the new versions beside the old (HOT) and the table stays the size of its rows. Full pages sent every
-- update elsewhere: bench/rest.ts's fleet left 100,000 counter rows in 190 MB, and every fleet-wide sum read
-- all of it (200 ms; 13 ms once compact).
ALTER TABLE node_compliance_counts SET (fillfactor = 50);

-- Members per node group, for the group and binding lists (`node_count`): counting them per listed group read
-- 100,000 index entries per page at 100,000 nodes. A counter row per group would make every enrollment into
-- the group wait for the one before it to commit, so each membership statement appends its signed delta
-- instead (as audit_action_counts does, migration 0010), and the read-model worker folds them into one row per
-- group now and then (server/domain/reach.ts `foldGroupSizes`). A group's size is the sum of its rows.
CREATE TABLE node_group_sizes (
  node_group_id uuid NOT NULL REFERENCES node_groups (id) ON DELETE CASCADE,
  n bigint NOT NULL
);
CREATE INDEX node_group_sizes_group_idx ON node_group_sizes (node_group_id);

CREATE FUNCTION node_group_sizes_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO node_group_sizes (node_group_id, n) SELECT node_group_id, count(*) FROM new_members GROUP BY 1;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO node_group_sizes (node_group_id, n)
    SELECT node_group_id, -count(*) FROM old_members o
     WHERE EXISTS (SELECT 1 FROM node_groups g WHERE g.id = o.node_group_id)
     GROUP BY 1;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER node_group_members_size_insert AFTER INSERT ON node_group_members
  REFERENCING NEW TABLE AS new_members FOR EACH STATEMENT EXECUTE FUNCTION node_group_sizes_delta();
CREATE TRIGGER node_group_members_size_delete AFTER DELETE ON node_group_members
  REFERENCING OLD TABLE AS old_members FOR EACH STATEMENT EXECUTE FUNCTION node_group_sizes_delta();
CREATE TRIGGER node_group_members_size_update AFTER UPDATE ON node_group_members
  REFERENCING OLD TABLE AS old_members NEW TABLE AS new_members
  FOR EACH STATEMENT EXECUTE FUNCTION node_group_sizes_delta();
INSERT INTO node_group_sizes (node_group_id, n) SELECT node_group_id, count(*) FROM node_group_members GROUP BY 1;
