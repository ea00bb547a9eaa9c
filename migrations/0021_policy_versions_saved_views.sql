-- Version history of policies and saved list views (issue 33).
--
-- policy_versions keeps every released version of a policy: its name, description and content as nodes
-- received them, who released it and when. Rows are written when a draft is released and when a revision is
-- released, never changed afterwards; a rollback starts a revision from an old row's content and, once
-- released, adds a new row (restored_from names the version it restored), so history is never rewritten.
-- A version number is released with one content only (every edit of a draft bumps it), so (policy, version)
-- is the key and releasing the same version again (released → draft → released without an edit) adds no row.

CREATE TABLE policy_versions (
  policy_id uuid NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
  version integer NOT NULL CHECK (version >= 1),
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  content text NOT NULL,
  released_by text NOT NULL DEFAULT '',
  released_at timestamptz NOT NULL DEFAULT now(),
  -- How the version came to be released: a draft released, a revision released, or a revision that restored
  -- an earlier version released.
  origin text NOT NULL CHECK (origin IN ('release', 'revision', 'rollback')),
  restored_from integer CHECK (restored_from IS NULL OR restored_from >= 1),
  PRIMARY KEY (policy_id, version)
);

-- What was released before this migration: the current content of every released or archived policy is the
-- one version known; who released it is not.
INSERT INTO policy_versions (policy_id, version, name, description, content, released_at, origin)
SELECT id, version, name, description, content, updated_at, 'release'
  FROM policies WHERE state IN ('released', 'archived');

-- A pending revision started by "restore version N" remembers N until its content is edited.
ALTER TABLE policy_revisions ADD COLUMN restored_from integer CHECK (restored_from IS NULL OR restored_from >= 1);

-- A named list query (filters and sort as the list page's URL query) of one user for one list page; they
-- follow the user across browsers.
CREATE TABLE saved_views (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  list text NOT NULL CHECK (list ~ '^[a-z][a-z0-9-]{0,39}$'),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  query text NOT NULL DEFAULT '' CHECK (length(query) <= 2000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (user_id, list, name)
);
