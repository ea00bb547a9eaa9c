-- Flatpak catalogue: repositories registered by administrators and the applications indexed from their
-- AppStream data. The metrics collector reads flatpak_repos.name / last_success_at and counts
-- flatpak_catalog_apps per repo_id.
CREATE TABLE flatpak_repos (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
  title text NOT NULL DEFAULT '',
  -- 'url': OSTree repository (or AppStream file) fetched on a schedule; 'upload': AppStream uploaded by an
  -- administrator (air-gapped sites), never fetched.
  source text NOT NULL CHECK (source IN ('url', 'upload')),
  url text NOT NULL DEFAULT '',
  gpg_key text NOT NULL DEFAULT '',
  arch text NOT NULL DEFAULT 'x86_64' CHECK (arch ~ '^[a-z0-9_]{1,16}$'),
  -- SHA-256 of the AppStream document last indexed: an identical refresh is 'unchanged'.
  appstream_sha256 text NOT NULL DEFAULT '',
  last_attempt_at timestamptz,
  last_success_at timestamptz,
  last_error text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE flatpak_catalog_apps (
  repo_id uuid NOT NULL REFERENCES flatpak_repos (id) ON DELETE CASCADE,
  app_id text NOT NULL,
  name text NOT NULL DEFAULT '',
  summary text NOT NULL DEFAULT '',
  icon_url text NOT NULL DEFAULT '',
  versions text[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (repo_id, app_id)
);
CREATE INDEX flatpak_catalog_apps_search ON flatpak_catalog_apps (lower(app_id), lower(name));
