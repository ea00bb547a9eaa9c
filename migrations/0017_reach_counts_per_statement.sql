-- The per-node compliance counters follow reached pairs a statement at a time (issue 22).
--
-- Enabling a binding that reaches 10,000 nodes inserts 10,000 policy_reach rows in one statement; the row
-- trigger of 0015 then ran three statements per row (lock the node's counters, read the pair's result, add
-- one), 1.2 s in all, with the binding's locks held meanwhile. This trigger does the same for all rows of the
-- statement at once: it locks the nodes' counters in node order (the order in which every statement that
-- writes many pairs writes them, so lock order is as before), then, in a fresh snapshot as every statement of
-- a trigger function takes one, reads the pairs' results and adds each node's counts in one UPDATE. The
-- concurrency rules of 0015 are unchanged: the counter row lock still orders reach changes against result
-- changes. Transition tables allow one event per trigger, hence two triggers on one function.

DROP TRIGGER policy_reach_counts ON policy_reach;
DROP FUNCTION node_compliance_reach();

CREATE FUNCTION node_compliance_reach_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d integer := CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END;
BEGIN
  -- A statement trigger runs even when its statement changed no row (a node joining a group without
  -- bindings): nothing to count then.
  IF NOT EXISTS (SELECT 1 FROM pairs) THEN
    RETURN NULL;
  END IF;
  -- Counters of nodes being deleted are gone already: nothing to count for them.
  PERFORM 1 FROM node_compliance_counts
    WHERE node_id IN (SELECT node_id FROM pairs) ORDER BY node_id FOR UPDATE;
  UPDATE node_compliance_counts n SET
      compliant = n.compliant + d * s.compliant,
      non_compliant = n.non_compliant + d * s.non_compliant,
      inapplicable = n.inapplicable + d * s.inapplicable,
      error = n.error + d * s.error,
      unknown = n.unknown + d * s.unknown,
      unreported = n.unreported + d * s.unreported
    FROM (
      SELECT p.node_id,
             count(*) FILTER (WHERE r.status = 'compliant')::int AS compliant,
             count(*) FILTER (WHERE r.status = 'non_compliant')::int AS non_compliant,
             count(*) FILTER (WHERE r.status = 'inapplicable')::int AS inapplicable,
             count(*) FILTER (WHERE r.status = 'error')::int AS error,
             count(*) FILTER (WHERE r.status = 'unknown')::int AS unknown,
             count(*) FILTER (WHERE r.status IS NULL)::int AS unreported
        FROM pairs p
        LEFT JOIN compliance_results r ON r.node_id = p.node_id AND r.policy_id = p.policy_id
       GROUP BY p.node_id
    ) s
   WHERE n.node_id = s.node_id;
  RETURN NULL;
END $$;

CREATE TRIGGER policy_reach_counts_insert AFTER INSERT ON policy_reach
  REFERENCING NEW TABLE AS pairs FOR EACH STATEMENT EXECUTE FUNCTION node_compliance_reach_pairs();
CREATE TRIGGER policy_reach_counts_delete AFTER DELETE ON policy_reach
  REFERENCING OLD TABLE AS pairs FOR EACH STATEMENT EXECUTE FUNCTION node_compliance_reach_pairs();
