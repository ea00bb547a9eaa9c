-- Fleet-wide totals kept as signed deltas (issue 36): the dashboard, the compliance summary, the compliance
-- list's status counts and the metrics scrape summed one node_compliance_counts row per node (100,000 rows at
-- 100,000 nodes), and the dashboard counted nodes by status over every node.
--
-- A single totals row would make every report that changes a node's counters wait for the report before it to
-- commit. As node_group_sizes does (migration 0022), each statement that changes counters or node statuses
-- appends one row of signed deltas instead, a reader sums the rows, and the read-model worker folds them into
-- one row now and then (`foldFleetTotals` in server/domain/compliance.ts, `foldNodeStatusSizes` in
-- server/domain/nodes.ts). The sum of the rows equals the sum over node_compliance_counts (and the count of
-- nodes by status) at every committed state: each delta row commits or rolls back with the statement that
-- caused it.

-- Sums of node_compliance_counts, plus nodes classified as the compliance summary counts them.
CREATE TABLE fleet_compliance_sizes (
  compliant bigint NOT NULL,
  non_compliant bigint NOT NULL,
  inapplicable bigint NOT NULL,
  error bigint NOT NULL,
  unknown bigint NOT NULL,
  unreported bigint NOT NULL,
  -- Counter rows (one per node).
  nodes bigint NOT NULL,
  -- Nodes with an error or non-compliant result.
  bad bigint NOT NULL,
  -- Nodes reached by a policy whose every result is compliant or inapplicable.
  good bigint NOT NULL,
  -- Nodes no policy reaches.
  none bigint NOT NULL
);

-- Appends the change of a statement's counter rows (transition tables new_counts, old_counts) as one row. Static
-- statements, so their plans are cached: a report pays one more statement trigger, not a parse and plan.
CREATE FUNCTION fleet_compliance_delta() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  plus fleet_compliance_sizes;
  minus fleet_compliance_sizes;
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    SELECT sum(c.compliant), sum(c.non_compliant), sum(c.inapplicable), sum(c.error), sum(c.unknown),
           sum(c.unreported), count(*), count(*) FILTER (WHERE c.error + c.non_compliant > 0),
           count(*) FILTER (WHERE c.error + c.non_compliant = 0 AND c.unknown + c.unreported = 0
                              AND c.compliant + c.inapplicable > 0),
           count(*) FILTER (WHERE c.compliant + c.non_compliant + c.inapplicable + c.error + c.unknown
                                  + c.unreported = 0)
      INTO plus FROM new_counts c;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    SELECT sum(c.compliant), sum(c.non_compliant), sum(c.inapplicable), sum(c.error), sum(c.unknown),
           sum(c.unreported), count(*), count(*) FILTER (WHERE c.error + c.non_compliant > 0),
           count(*) FILTER (WHERE c.error + c.non_compliant = 0 AND c.unknown + c.unreported = 0
                              AND c.compliant + c.inapplicable > 0),
           count(*) FILTER (WHERE c.compliant + c.non_compliant + c.inapplicable + c.error + c.unknown
                                  + c.unreported = 0)
      INTO minus FROM old_counts c;
  END IF;
  INSERT INTO fleet_compliance_sizes
  SELECT d.* FROM (SELECT coalesce(plus.compliant, 0) - coalesce(minus.compliant, 0) AS compliant,
      coalesce(plus.non_compliant, 0) - coalesce(minus.non_compliant, 0),
      coalesce(plus.inapplicable, 0) - coalesce(minus.inapplicable, 0),
      coalesce(plus.error, 0) - coalesce(minus.error, 0), coalesce(plus.unknown, 0) - coalesce(minus.unknown, 0),
      coalesce(plus.unreported, 0) - coalesce(minus.unreported, 0),
      coalesce(plus.nodes, 0) - coalesce(minus.nodes, 0), coalesce(plus.bad, 0) - coalesce(minus.bad, 0),
      coalesce(plus.good, 0) - coalesce(minus.good, 0), coalesce(plus.none, 0) - coalesce(minus.none, 0)) d
   WHERE d IS DISTINCT FROM ROW(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)::fleet_compliance_sizes;
  RETURN NULL;
END $$;

CREATE TRIGGER node_compliance_counts_fleet_insert AFTER INSERT ON node_compliance_counts
  REFERENCING NEW TABLE AS new_counts FOR EACH STATEMENT EXECUTE FUNCTION fleet_compliance_delta();
CREATE TRIGGER node_compliance_counts_fleet_delete AFTER DELETE ON node_compliance_counts
  REFERENCING OLD TABLE AS old_counts FOR EACH STATEMENT EXECUTE FUNCTION fleet_compliance_delta();
CREATE TRIGGER node_compliance_counts_fleet_update AFTER UPDATE ON node_compliance_counts
  REFERENCING OLD TABLE AS old_counts NEW TABLE AS new_counts
  FOR EACH STATEMENT EXECUTE FUNCTION fleet_compliance_delta();

-- A result's change of status moved its node's counters in two statements each way (old status -1, unreported
-- +1, unreported -1, new status +1: four counter updates, now four delta rows). One statement per change: the
-- same counts, the same locks in the same order (the node's counter row, then the pair's reach row read).
CREATE FUNCTION node_compliance_move(n uuid, from_k text, to_k text) RETURNS void LANGUAGE sql AS $$
  UPDATE node_compliance_counts SET
    compliant = compliant + (to_k = 'compliant')::int - (from_k = 'compliant')::int,
    non_compliant = non_compliant + (to_k = 'non_compliant')::int - (from_k = 'non_compliant')::int,
    inapplicable = inapplicable + (to_k = 'inapplicable')::int - (from_k = 'inapplicable')::int,
    error = error + (to_k = 'error')::int - (from_k = 'error')::int,
    unknown = unknown + (to_k = 'unknown')::int - (from_k = 'unknown')::int,
    unreported = unreported + (to_k = 'unreported')::int - (from_k = 'unreported')::int
  WHERE node_id = n
$$;

CREATE OR REPLACE FUNCTION node_compliance_result() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.node_id = NEW.node_id AND OLD.policy_id = NEW.policy_id THEN
    IF OLD.status = NEW.status THEN
      RETURN NULL;
    END IF;
    PERFORM 1 FROM node_compliance_counts WHERE node_id = NEW.node_id FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM policy_reach WHERE policy_id = NEW.policy_id AND node_id = NEW.node_id) THEN
      PERFORM node_compliance_move(NEW.node_id, OLD.status, NEW.status);
    END IF;
    RETURN NULL;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    PERFORM 1 FROM node_compliance_counts WHERE node_id = OLD.node_id FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM policy_reach WHERE policy_id = OLD.policy_id AND node_id = OLD.node_id) THEN
      PERFORM node_compliance_move(OLD.node_id, OLD.status, 'unreported');
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    PERFORM 1 FROM node_compliance_counts WHERE node_id = NEW.node_id FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM policy_reach WHERE policy_id = NEW.policy_id AND node_id = NEW.node_id) THEN
      PERFORM node_compliance_move(NEW.node_id, 'unreported', NEW.status);
    END IF;
  END IF;
  RETURN NULL;
END $$;

-- Nodes per status. A node's status changes rarely, but heartbeats update its row often: a row trigger that
-- fires only when the status changes costs them nothing (a statement trigger with transition tables would copy
-- every updated row, and PostgreSQL allows no column list with transition tables).
CREATE TABLE node_status_sizes (
  status text NOT NULL,
  n bigint NOT NULL
);

CREATE FUNCTION node_status_sizes_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO node_status_sizes (status, n) VALUES (NEW.status, 1);
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO node_status_sizes (status, n) VALUES (OLD.status, -1);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER nodes_status_size_insert AFTER INSERT ON nodes
  FOR EACH ROW EXECUTE FUNCTION node_status_sizes_delta();
CREATE TRIGGER nodes_status_size_delete AFTER DELETE ON nodes
  FOR EACH ROW EXECUTE FUNCTION node_status_sizes_delta();
CREATE TRIGGER nodes_status_size_update AFTER UPDATE OF status ON nodes
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION node_status_sizes_delta();

-- The starting totals. Creating the triggers locked both tables against writes until this migration commits,
-- so every change is either counted here or appends its own delta.
INSERT INTO fleet_compliance_sizes
SELECT coalesce(sum(compliant), 0), coalesce(sum(non_compliant), 0), coalesce(sum(inapplicable), 0),
       coalesce(sum(error), 0), coalesce(sum(unknown), 0), coalesce(sum(unreported), 0), count(*),
       count(*) FILTER (WHERE error + non_compliant > 0),
       count(*) FILTER (WHERE error + non_compliant = 0 AND unknown + unreported = 0
                          AND compliant + inapplicable > 0),
       count(*) FILTER (WHERE compliant + non_compliant + inapplicable + error + unknown + unreported = 0)
  FROM node_compliance_counts;
INSERT INTO node_status_sizes (status, n) SELECT status, count(*) FROM nodes GROUP BY status;

-- Certificates by time to expiry (the dashboard's buckets, relative to now()): the dated buckets are a range
-- of this index (only the nodes whose certificate expires within 90 days are read, and from the index alone),
-- the revoked ones among them are found through the index below, and `later` is the node total less the rest.
CREATE INDEX nodes_cert_not_after_idx ON nodes (cert_not_after);
-- Nodes holding a revoked certificate: one probe per revoked serial.
CREATE INDEX nodes_cert_serial_lower_idx ON nodes (lower(cert_serial));
-- The newest node, which a metrics scrape reads to see whether nodes came (server/metrics/collector.ts): one
-- probe instead of a pass over the nodes. Creation times never change, so the index costs updates nothing.
CREATE INDEX nodes_created_at_idx ON nodes (created_at);
