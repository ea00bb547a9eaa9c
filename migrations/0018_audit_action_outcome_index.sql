-- The audit log's action index also holds each row's outcome (issue 22).
--
-- The console filters the log by action and outcome together; with the outcome in the index, the ids of a
-- filtered page come from the index alone (once the table's pages are marked all-visible by vacuum), and only
-- the page's own rows are read from the table. Without it, every row an offset skipped was read from the
-- table just to test its outcome.

DROP INDEX audit_logs_action_id_idx;
CREATE INDEX audit_logs_action_id_idx ON audit_logs (action, id DESC) INCLUDE (outcome);
