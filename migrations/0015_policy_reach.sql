-- Which policy reaches which node, and each node's compliance counts, kept by triggers (issue 22).
--
-- "Policy p reaches node n" (p released, and an enabled binding of p to a group n belongs to) used to be
-- evaluated over every (node, policy) pair at every request; at 10,000 nodes and 200 policies that was a
-- second per compliance page and per dashboard. policy_reach holds the reached pairs, with the number of
-- (enabled binding, membership) paths that deliver the pair; node_compliance_counts holds, per node, the
-- reached pairs by the status of their latest result (`unreported` while there is none).
--
-- Concurrency (READ COMMITTED; each statement of a trigger function takes a fresh snapshot): every trigger
-- makes its own change first, then takes a lock that every change able to touch the same pairs also takes,
-- then reads the other tables. Whichever of two such transactions takes the lock second reads what the first
-- committed, so the deltas add up to the truth in either order, and path counts are signed deltas that
-- commute. The locks are transaction-scoped advisory locks (class 22015: node group, 22016: policy):
--   membership change of group g     shared g
--   binding change of policy p, g    shared p, then exclusive g
--   policy release/un-release of p   exclusive p, then exclusive every group with an enabled binding of p
-- and, per node, the row lock on node_compliance_counts orders reach changes against result changes.
-- Enrollments into one group therefore never wait for each other; they wait only for binding and policy
-- state changes of that group.

CREATE TABLE policy_reach (
  policy_id uuid NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
  node_id uuid NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  -- Enabled bindings of the (released) policy to groups the node belongs to; the row goes at zero.
  paths integer NOT NULL CHECK (paths >= 0),
  PRIMARY KEY (policy_id, node_id)
);
CREATE INDEX policy_reach_node_idx ON policy_reach (node_id, policy_id);

CREATE TABLE node_compliance_counts (
  node_id uuid PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
  compliant integer NOT NULL DEFAULT 0,
  non_compliant integer NOT NULL DEFAULT 0,
  inapplicable integer NOT NULL DEFAULT 0,
  error integer NOT NULL DEFAULT 0,
  -- Reported with status unknown.
  unknown integer NOT NULL DEFAULT 0,
  -- Reached, no result yet.
  unreported integer NOT NULL DEFAULT 0
);

-- Adds `d` reached pairs of node `n` under status key `k` (a status or 'unreported').
CREATE FUNCTION node_compliance_add(n uuid, k text, d integer) RETURNS void LANGUAGE sql AS $$
  UPDATE node_compliance_counts SET
    compliant = compliant + CASE WHEN k = 'compliant' THEN d ELSE 0 END,
    non_compliant = non_compliant + CASE WHEN k = 'non_compliant' THEN d ELSE 0 END,
    inapplicable = inapplicable + CASE WHEN k = 'inapplicable' THEN d ELSE 0 END,
    error = error + CASE WHEN k = 'error' THEN d ELSE 0 END,
    unknown = unknown + CASE WHEN k = 'unknown' THEN d ELSE 0 END,
    unreported = unreported + CASE WHEN k = 'unreported' THEN d ELSE 0 END
  WHERE node_id = n
$$;

CREATE FUNCTION policy_reach_membership() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.node_id = NEW.node_id AND OLD.node_group_id = NEW.node_group_id THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    PERFORM pg_advisory_xact_lock_shared(22015, hashtext(OLD.node_group_id::text));
    -- Membership rows are unique, so the old row's paths are exactly the group's enabled bindings.
    UPDATE policy_reach r SET paths = r.paths - 1
      FROM policy_bindings b JOIN policies x ON x.id = b.policy_id AND x.state = 'released'
     WHERE b.node_group_id = OLD.node_group_id AND b.state = 'enabled'
       AND r.policy_id = b.policy_id AND r.node_id = OLD.node_id;
    DELETE FROM policy_reach WHERE node_id = OLD.node_id AND paths = 0;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    PERFORM pg_advisory_xact_lock_shared(22015, hashtext(NEW.node_group_id::text));
    INSERT INTO policy_reach AS r (policy_id, node_id, paths)
    SELECT b.policy_id, NEW.node_id, 1
      FROM policy_bindings b JOIN policies x ON x.id = b.policy_id AND x.state = 'released'
     WHERE b.node_group_id = NEW.node_group_id AND b.state = 'enabled'
    ON CONFLICT (policy_id, node_id) DO UPDATE SET paths = r.paths + 1;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION policy_reach_binding() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  was_on boolean := TG_OP <> 'INSERT' AND OLD.state = 'enabled';
  is_on boolean := TG_OP <> 'DELETE' AND NEW.state = 'enabled';
BEGIN
  IF TG_OP = 'UPDATE' AND was_on = is_on
     AND OLD.policy_id = NEW.policy_id AND OLD.node_group_id = NEW.node_group_id THEN
    RETURN NULL;
  END IF;
  IF was_on THEN
    PERFORM pg_advisory_xact_lock_shared(22016, hashtext(OLD.policy_id::text));
    PERFORM pg_advisory_xact_lock(22015, hashtext(OLD.node_group_id::text));
    -- The binding is no longer enabled (or gone): take one path per member of its group away.
    UPDATE policy_reach r SET paths = r.paths - 1
      FROM node_group_members m
     WHERE m.node_group_id = OLD.node_group_id AND r.policy_id = OLD.policy_id AND r.node_id = m.node_id
       AND EXISTS (SELECT 1 FROM policies x WHERE x.id = OLD.policy_id AND x.state = 'released');
    DELETE FROM policy_reach WHERE policy_id = OLD.policy_id AND paths = 0;
  END IF;
  IF is_on THEN
    PERFORM pg_advisory_xact_lock_shared(22016, hashtext(NEW.policy_id::text));
    PERFORM pg_advisory_xact_lock(22015, hashtext(NEW.node_group_id::text));
    INSERT INTO policy_reach AS r (policy_id, node_id, paths)
    SELECT NEW.policy_id, m.node_id, 1 FROM node_group_members m
     WHERE m.node_group_id = NEW.node_group_id
       AND EXISTS (SELECT 1 FROM policies x WHERE x.id = NEW.policy_id AND x.state = 'released')
     ORDER BY m.node_id
    ON CONFLICT (policy_id, node_id) DO UPDATE SET paths = r.paths + 1;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION policy_reach_policy_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(22016, hashtext(NEW.id::text));
  PERFORM pg_advisory_xact_lock(22015, hashtext(g::text))
     FROM (SELECT DISTINCT node_group_id AS g FROM policy_bindings
            WHERE policy_id = NEW.id AND state = 'enabled' ORDER BY 1) s;
  IF NEW.state = 'released' THEN
    INSERT INTO policy_reach AS r (policy_id, node_id, paths)
    SELECT NEW.id, m.node_id, count(*)
      FROM policy_bindings b JOIN node_group_members m ON m.node_group_id = b.node_group_id
     WHERE b.policy_id = NEW.id AND b.state = 'enabled'
     GROUP BY m.node_id ORDER BY m.node_id
    ON CONFLICT (policy_id, node_id) DO UPDATE SET paths = r.paths + excluded.paths;
  ELSE
    -- No longer released: no path delivers it any more.
    DELETE FROM policy_reach WHERE policy_id = NEW.id;
  END IF;
  RETURN NULL;
END $$;

-- A reached pair appears or goes: count it under its latest result's status.
CREATE FUNCTION node_compliance_reach() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  pair policy_reach;
  k text;
BEGIN
  IF TG_OP = 'INSERT' THEN pair := NEW; ELSE pair := OLD; END IF;
  PERFORM 1 FROM node_compliance_counts WHERE node_id = pair.node_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL; -- the node is being deleted
  END IF;
  SELECT status INTO k FROM compliance_results WHERE node_id = pair.node_id AND policy_id = pair.policy_id;
  PERFORM node_compliance_add(pair.node_id, coalesce(k, 'unreported'),
                              CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END);
  RETURN NULL;
END $$;

-- A result changes: move its pair between status keys when the policy reaches the node.
CREATE FUNCTION node_compliance_result() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.node_id = NEW.node_id AND OLD.policy_id = NEW.policy_id
     AND OLD.status = NEW.status THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    PERFORM 1 FROM node_compliance_counts WHERE node_id = OLD.node_id FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM policy_reach WHERE policy_id = OLD.policy_id AND node_id = OLD.node_id) THEN
      PERFORM node_compliance_add(OLD.node_id, OLD.status, -1);
      PERFORM node_compliance_add(OLD.node_id, 'unreported', 1);
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    PERFORM 1 FROM node_compliance_counts WHERE node_id = NEW.node_id FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM policy_reach WHERE policy_id = NEW.policy_id AND node_id = NEW.node_id) THEN
      PERFORM node_compliance_add(NEW.node_id, 'unreported', -1);
      PERFORM node_compliance_add(NEW.node_id, NEW.status, 1);
    END IF;
  END IF;
  RETURN NULL;
END $$;

-- Deleting a group or a policy cascades to several tables at once, and PostgreSQL fires the row triggers of
-- those cascades only after all of them ran: a membership's trigger would find the group's bindings already
-- gone (and the other way round), and a reached pair's trigger would find its result already gone. Removing
-- the rows that carry reach first, as statements of their own, lets their triggers see the rest in place.
CREATE FUNCTION node_groups_drop_reach() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM node_group_members WHERE node_group_id = OLD.id;
  RETURN OLD;
END $$;

CREATE FUNCTION policies_drop_reach() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM policy_reach WHERE policy_id = OLD.id;
  RETURN OLD;
END $$;

CREATE FUNCTION node_compliance_node() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO node_compliance_counts (node_id) VALUES (NEW.id);
  RETURN NULL;
END $$;

CREATE TRIGGER nodes_compliance_counts AFTER INSERT ON nodes
  FOR EACH ROW EXECUTE FUNCTION node_compliance_node();
CREATE TRIGGER node_groups_reach BEFORE DELETE ON node_groups
  FOR EACH ROW EXECUTE FUNCTION node_groups_drop_reach();
CREATE TRIGGER policies_reach_delete BEFORE DELETE ON policies
  FOR EACH ROW EXECUTE FUNCTION policies_drop_reach();
CREATE TRIGGER node_group_members_reach AFTER INSERT OR UPDATE OR DELETE ON node_group_members
  FOR EACH ROW EXECUTE FUNCTION policy_reach_membership();
CREATE TRIGGER policy_bindings_reach AFTER INSERT OR UPDATE OR DELETE ON policy_bindings
  FOR EACH ROW EXECUTE FUNCTION policy_reach_binding();
CREATE TRIGGER policies_reach AFTER UPDATE OF state ON policies
  FOR EACH ROW WHEN ((OLD.state = 'released') IS DISTINCT FROM (NEW.state = 'released'))
  EXECUTE FUNCTION policy_reach_policy_state();
CREATE TRIGGER policy_reach_counts AFTER INSERT OR DELETE ON policy_reach
  FOR EACH ROW EXECUTE FUNCTION node_compliance_reach();
CREATE TRIGGER compliance_results_counts AFTER INSERT OR UPDATE OR DELETE ON compliance_results
  FOR EACH ROW EXECUTE FUNCTION node_compliance_result();

-- Today's state. The triggers above are in place first, and this migration holds their tables' locks until
-- it commits, so no change slips between the triggers and the fill.
INSERT INTO node_compliance_counts (node_id) SELECT id FROM nodes;
INSERT INTO policy_reach (policy_id, node_id, paths)
SELECT b.policy_id, m.node_id, count(*)
  FROM policy_bindings b JOIN node_group_members m ON m.node_group_id = b.node_group_id
  JOIN policies p ON p.id = b.policy_id
 WHERE b.state = 'enabled' AND p.state = 'released'
 GROUP BY 1, 2;

-- Result lists in report order (newest first), overall and per status.
CREATE INDEX compliance_results_reported_idx ON compliance_results (reported_at DESC NULLS LAST);
CREATE INDEX compliance_results_status_reported_idx ON compliance_results (status, reported_at DESC NULLS LAST);
DROP INDEX compliance_results_status_idx;
