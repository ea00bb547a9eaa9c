-- Fleet-wide totals kept as signed deltas (issue 36): the dashboard, the compliance summary, the compliance
-- list's status counts and the metrics scrape summed one node_compliance_counts row per node (100,000 rows at
-- 100,000 nodes), and the dashboard counted nodes by status over every node.
--
-- A single totals row would make every report that changes a node's counters wait for the report before it to
-- commit. As node_group_sizes does (migration 0022), each statement that changes counters or node statuses
-- appends one row of signed deltas instead, a reader sums the rows, and the read-model worker folds them into
-- one row now and then (server/domain/compliance.ts `foldFleetTotals`). The sum of the rows equals the sum over
-- node_compliance_counts (and the count of nodes by status) at every committed state: each delta row commits
-- or rolls back with the statement that caused it.

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

-- Appends the change of statement's counter rows (transition tables new_counts, old_counts) as one row.
CREATE FUNCTION fleet_compliance_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Dynamic: a transition table the event does not have cannot appear in a planned statement.
  EXECUTE format($q$
  INSERT INTO fleet_compliance_sizes
  SELECT sum(compliant), sum(non_compliant), sum(inapplicable), sum(error), sum(unknown), sum(unreported),
         sum(nodes), sum(bad), sum(good), sum(none)
    FROM (
      SELECT d * c.compliant AS compliant, d * c.non_compliant AS non_compliant,
             d * c.inapplicable AS inapplicable, d * c.error AS error, d * c.unknown AS unknown,
             d * c.unreported AS unreported, d AS nodes,
             d * (c.error + c.non_compliant > 0)::int AS bad,
             d * (c.error + c.non_compliant = 0 AND c.unknown + c.unreported = 0
                  AND c.compliant + c.inapplicable > 0)::int AS good,
             d * (c.compliant + c.non_compliant + c.inapplicable + c.error + c.unknown + c.unreported = 0)::int
               AS none
        FROM (%s) c
    ) s
  -- A statement that changed nothing (no row, or the same counts written again) appends nothing.
  HAVING sum(compliant) <> 0 OR sum(non_compliant) <> 0 OR sum(inapplicable) <> 0 OR sum(error) <> 0
      OR sum(unknown) <> 0 OR sum(unreported) <> 0 OR sum(nodes) <> 0 OR sum(bad) <> 0 OR sum(good) <> 0
      OR sum(none) <> 0$q$,
    CASE TG_OP
      WHEN 'INSERT' THEN 'SELECT 1 AS d, * FROM new_counts'
      WHEN 'DELETE' THEN 'SELECT -1 AS d, * FROM old_counts'
      ELSE 'SELECT 1 AS d, * FROM new_counts UNION ALL SELECT -1, * FROM old_counts'
    END);
  RETURN NULL;
END $$;

CREATE TRIGGER node_compliance_counts_fleet_insert AFTER INSERT ON node_compliance_counts
  REFERENCING NEW TABLE AS new_counts FOR EACH STATEMENT EXECUTE FUNCTION fleet_compliance_delta();
CREATE TRIGGER node_compliance_counts_fleet_delete AFTER DELETE ON node_compliance_counts
  REFERENCING OLD TABLE AS old_counts FOR EACH STATEMENT EXECUTE FUNCTION fleet_compliance_delta();
CREATE TRIGGER node_compliance_counts_fleet_update AFTER UPDATE ON node_compliance_counts
  REFERENCING OLD TABLE AS old_counts NEW TABLE AS new_counts
  FOR EACH STATEMENT EXECUTE FUNCTION fleet_compliance_delta();

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

-- The starting totals (migrations run in one transaction, so no change slips between these and the triggers).
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
