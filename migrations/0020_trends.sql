-- Trends kept by the server (issue 33): the fleet's compliance and node status sampled once an hour and
-- rolled into one point a day, and each recent rollout's progress per hour.
--
-- A sample is taken by whichever replica first finds its hour unsampled: it takes a transaction-scoped
-- advisory lock (class 22020), looks for the hour's row again and only then reads the counters, so replicas
-- never read twice and the primary key makes a second row for one hour impossible whatever happens.

-- One point of the fleet per hour ('hour') and per day ('day'). A day's point is its latest hourly sample (the
-- state at the end of the day, or now for today), replaced by each later sample of that day.
CREATE TABLE fleet_trend_points (
  granularity text NOT NULL CHECK (granularity IN ('hour', 'day')),
  -- Start of the hour or day (UTC), as date_trunc gives it.
  bucket timestamptz NOT NULL,
  -- When the sample was read (for a day's point: the time of the hourly sample it repeats).
  sampled_at timestamptz NOT NULL,
  -- Nodes by their worst result among the policies that reach them: error, else non_compliant, else unknown
  -- (not reported yet, or reported as unknown), else compliant; without_policies: no policy reaches them.
  nodes integer NOT NULL CHECK (nodes >= 0),
  compliant integer NOT NULL CHECK (compliant >= 0),
  non_compliant integer NOT NULL CHECK (non_compliant >= 0),
  error integer NOT NULL CHECK (error >= 0),
  unknown integer NOT NULL CHECK (unknown >= 0),
  without_policies integer NOT NULL CHECK (without_policies >= 0),
  -- Nodes by connection: never_seen (no agent ever connected), else online, degraded or offline (the rest).
  online integer NOT NULL CHECK (online >= 0),
  degraded integer NOT NULL CHECK (degraded >= 0),
  offline integer NOT NULL CHECK (offline >= 0),
  never_seen integer NOT NULL CHECK (never_seen >= 0),
  PRIMARY KEY (granularity, bucket)
);

-- When each version of a policy started to be delivered: the moment the policy became released with that
-- version, or the version changed while released. Releasing the same version again (after archiving it)
-- starts its rollout again. Kept by a trigger, so every path that releases (routes, import, revisions) counts.
CREATE TABLE policy_rollouts (
  policy_id uuid NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
  version integer NOT NULL CHECK (version >= 1),
  started_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (policy_id, version)
);
CREATE INDEX policy_rollouts_started_idx ON policy_rollouts (started_at);

CREATE FUNCTION policy_rollout_started() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state = 'released'
     AND (TG_OP = 'INSERT' OR OLD.state <> 'released' OR OLD.version <> NEW.version) THEN
    INSERT INTO policy_rollouts (policy_id, version) VALUES (NEW.id, NEW.version)
      ON CONFLICT (policy_id, version) DO UPDATE SET started_at = now();
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER policy_rollout_started AFTER INSERT OR UPDATE OF state, version ON policies
  FOR EACH ROW EXECUTE FUNCTION policy_rollout_started();

-- What is released now started no later than its last change.
INSERT INTO policy_rollouts (policy_id, version, started_at)
SELECT id, version, updated_at FROM policies WHERE state = 'released';

-- A rollout's progress once an hour: the nodes the policy reached and where they stood with `version`
-- (pending: no report on that version yet). Sampled while the rollout is younger than the hourly retention,
-- and purged with the fleet's hourly points.
CREATE TABLE policy_trend_points (
  policy_id uuid NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
  bucket timestamptz NOT NULL,
  version integer NOT NULL CHECK (version >= 1),
  sampled_at timestamptz NOT NULL,
  reached integer NOT NULL CHECK (reached >= 0),
  compliant integer NOT NULL CHECK (compliant >= 0),
  pending integer NOT NULL CHECK (pending >= 0),
  error integer NOT NULL CHECK (error >= 0),
  non_compliant integer NOT NULL CHECK (non_compliant >= 0),
  inapplicable integer NOT NULL CHECK (inapplicable >= 0),
  PRIMARY KEY (policy_id, bucket)
);
CREATE INDEX policy_trend_points_bucket_idx ON policy_trend_points (bucket);
