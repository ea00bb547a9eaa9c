-- Indexes for reading a fleet of 100,000 nodes (issue 36): node search, and a scrape's changed nodes.
--
-- The node list's search (a case-insensitive substring of name, FQDN, address or machine id, one ILIKE over
-- the four joined by a unit separator: server/domain/nodes.ts) read every node: at 100,000 nodes 180 ms a
-- page. A trigram index on that same expression serves the infix match (ILIKE '%…%' with three characters or
-- more; shorter text still scans, and the planner chooses).
--
-- pg_trgm is a contrib extension: PostgreSQL packages ship it (and it is trusted: a database owner may create
-- it), the embedded PGlite has it only when loaded at start, which the server does not do. Where it is missing,
-- or the role may not create it, the index is left out and the search reads every node as before: the results
-- are the same either way, only the time differs.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
    BEGIN
      CREATE EXTENSION IF NOT EXISTS pg_trgm;
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE NOTICE 'pg_trgm not created (%): node search reads every node; CREATE EXTENSION pg_trgm as a superuser and re-create index nodes_search_trgm_idx to speed it up', SQLERRM;
    END;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
    -- The expression must stay exactly the one nodeFilterWhere() matches, or the planner cannot use it.
    CREATE INDEX IF NOT EXISTS nodes_search_trgm_idx ON nodes
      USING gin ((name || E'\x1f' || fqdn || E'\x1f' || ip_address || E'\x1f' || machine_id) gin_trgm_ops);
  END IF;
END $$;

-- A metrics scrape reads the nodes changed since the one before (server/metrics/node_series.ts, by
-- `updated_at`, which every change of a node sets): without an index that was a pass over every node at each
-- scrape. Heartbeats already update an indexed column (`last_seen`), so this index costs them no HOT update.
CREATE INDEX nodes_updated_at_idx ON nodes (updated_at);
