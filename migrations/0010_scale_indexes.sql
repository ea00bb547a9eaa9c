-- Fleet-size reads (issue 22, measured with bench/rest.ts on 10,000 nodes and 1,000,000 audit rows).

-- Audit rows per action for the metrics gauge (svc_audit_events_total) without reading the whole audit log at
-- every scrape. Statement triggers append one signed delta per action per statement (inserts never wait on
-- each other, unlike a shared counter row updated inside every audited transaction); the scrape adds the
-- deltas up and folds them into one row per action (server/metrics/collector.ts).
CREATE TABLE audit_action_counts (
  action text NOT NULL,
  n bigint NOT NULL
);
CREATE INDEX audit_action_counts_action_idx ON audit_action_counts (action);

CREATE FUNCTION audit_action_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_action_counts (action, n) SELECT action, count(*) FROM new_rows GROUP BY action;
  RETURN NULL;
END $$;

CREATE FUNCTION audit_action_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_action_counts (action, n) SELECT action, -count(*) FROM old_rows GROUP BY action;
  RETURN NULL;
END $$;

CREATE FUNCTION audit_action_counts_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM audit_action_counts;
  RETURN NULL;
END $$;

-- Triggers first: creating them locks out concurrent audit inserts until this migration commits, so the
-- initial count below sees every row and no row is counted twice.
CREATE TRIGGER audit_logs_count_insert AFTER INSERT ON audit_logs
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audit_action_counts_insert();
CREATE TRIGGER audit_logs_count_delete AFTER DELETE ON audit_logs
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION audit_action_counts_delete();
CREATE TRIGGER audit_logs_count_truncate AFTER TRUNCATE ON audit_logs
  FOR EACH STATEMENT EXECUTE FUNCTION audit_action_counts_truncate();
INSERT INTO audit_action_counts (action, n) SELECT action, count(*) FROM audit_logs GROUP BY action;

-- Audit log filters read newest first: per action and per user, the index gives rows in page order.
CREATE INDEX audit_logs_action_id_idx ON audit_logs (action, id DESC);
CREATE INDEX audit_logs_username_id_idx ON audit_logs (username, id DESC);
DROP INDEX audit_logs_action_idx;

-- Node list sorted by last contact, newest first (the console's "recently seen" order).
CREATE INDEX nodes_last_seen_idx ON nodes (last_seen DESC NULLS LAST, name, id);
