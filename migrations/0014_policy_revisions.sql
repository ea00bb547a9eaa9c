-- A pending revision of a released policy: edited while the released content keeps being delivered, then
-- either released (content replaced and version bumped in one transaction) or discarded. At most one per
-- policy; base_version is the released version it was started from, so a release over a newer version is
-- refused instead of silently dropping that change.
CREATE TABLE policy_revisions (
  policy_id uuid PRIMARY KEY REFERENCES policies (id) ON DELETE CASCADE,
  base_version integer NOT NULL CHECK (base_version >= 1),
  description text NOT NULL DEFAULT '',
  content text NOT NULL,
  created_by text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
