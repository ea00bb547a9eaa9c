-- svc initial schema. Every resource of the spec, with the constraints that protect it.
-- Identifiers are uuid (gen_random_uuid, built into PostgreSQL 13+), times are timestamptz.

-- Identity and access ------------------------------------------------------------------------------------

CREATE TABLE users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  username text NOT NULL UNIQUE CHECK (username ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$'),
  password_hash text NOT NULL DEFAULT '',
  email text NOT NULL DEFAULT '',
  full_name text NOT NULL DEFAULT '',
  source text NOT NULL DEFAULT 'local' CHECK (source ~ '^[a-z][a-z0-9_]*$'),
  enabled boolean NOT NULL DEFAULT true,
  -- Access tokens issued before this instant are rejected (logout, disable, password change).
  tokens_valid_after timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Rotating refresh tokens: each use replaces the token; presenting a used one revokes the whole family.
CREATE TABLE refresh_tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  family_id uuid NOT NULL,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  token_hash text NOT NULL UNIQUE,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_user_idx ON refresh_tokens (user_id);

-- Permission catalogue: one row per resource:action pair; the id is the pair itself.
CREATE TABLE permissions (
  id text PRIMARY KEY CHECK (id = resource || ':' || action),
  resource text NOT NULL,
  action text NOT NULL,
  description text NOT NULL DEFAULT '',
  UNIQUE (resource, action)
);

CREATE TABLE roles (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 100),
  description text NOT NULL DEFAULT '',
  builtin boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE role_permissions (
  role_id uuid NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
  permission_id text NOT NULL REFERENCES permissions (id) ON DELETE CASCADE,
  PRIMARY KEY (role_id, permission_id)
);

CREATE TABLE user_groups (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 100),
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE user_group_members (
  user_group_id uuid NOT NULL REFERENCES user_groups (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_group_id, user_id)
);

-- Fleet ------------------------------------------------------------------------------------------------

CREATE TABLE node_groups (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 100),
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A role reaches a user directly or through a user group, globally or scoped to one node group.
CREATE TABLE role_bindings (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  role_id uuid NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
  user_id uuid REFERENCES users (id) ON DELETE CASCADE,
  user_group_id uuid REFERENCES user_groups (id) ON DELETE CASCADE,
  scope_type text NOT NULL DEFAULT 'global' CHECK (scope_type IN ('global', 'node_group')),
  scope_id uuid REFERENCES node_groups (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((user_id IS NULL) <> (user_group_id IS NULL)),
  CHECK ((scope_type = 'global') = (scope_id IS NULL)),
  UNIQUE NULLS NOT DISTINCT (role_id, user_id, user_group_id, scope_type, scope_id)
);
CREATE INDEX role_bindings_user_idx ON role_bindings (user_id);
CREATE INDEX role_bindings_user_group_idx ON role_bindings (user_group_id);

CREATE TABLE nodes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Equals the certificate Common Name; the agent's identity.
  name text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$'),
  status text NOT NULL DEFAULT 'unknown' CHECK (status IN ('online', 'degraded', 'offline', 'unknown')),
  status_reason text NOT NULL DEFAULT '',
  fqdn text NOT NULL DEFAULT '',
  ip_address text NOT NULL DEFAULT '',
  os_name text NOT NULL DEFAULT '',
  os_version text NOT NULL DEFAULT '',
  desktop_environments text[] NOT NULL DEFAULT '{}',
  agent_version text NOT NULL DEFAULT '',
  machine_id text NOT NULL DEFAULT '',
  gnome_version text NOT NULL DEFAULT '',
  -- Health as last reported by the agent's heartbeat (feeds the degraded status).
  agent_healthy boolean NOT NULL DEFAULT true,
  agent_health_message text NOT NULL DEFAULT '',
  last_seen timestamptz,
  cert_serial text,
  cert_not_after timestamptz,
  notes text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX nodes_status_idx ON nodes (status);

CREATE TABLE node_group_members (
  node_id uuid NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  node_group_id uuid NOT NULL REFERENCES node_groups (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (node_id, node_group_id)
);
CREATE INDEX node_group_members_group_idx ON node_group_members (node_group_id);

-- Every serial ever issued to a node, so revoking or deleting the node refuses all of them.
CREATE TABLE node_certificates (
  serial text PRIMARY KEY CHECK (serial ~ '^[0-9a-f]+$'),
  node_id uuid REFERENCES nodes (id) ON DELETE SET NULL,
  not_before timestamptz NOT NULL,
  not_after timestamptz NOT NULL,
  issued_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX node_certificates_node_idx ON node_certificates (node_id);

-- Revocations outlive the node (node_id becomes NULL on delete) so a deleted node's certificate stays refused.
CREATE TABLE revoked_certificates (
  serial text PRIMARY KEY CHECK (serial ~ '^[0-9a-f]+$'),
  node_id uuid REFERENCES nodes (id) ON DELETE SET NULL,
  reason text NOT NULL DEFAULT '',
  revoked_at timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a token is stored; deleting the row consumes it.
CREATE TABLE enrollment_tokens (
  token_hash text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  node_group_id uuid NOT NULL REFERENCES node_groups (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL,
  created_by text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Policies -----------------------------------------------------------------------------------------------

CREATE TABLE policies (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '',
  -- Wire name, PascalCase; unknown types are allowed (forward compatibility).
  type text NOT NULL CHECK (type ~ '^[A-Z][A-Za-z0-9]{0,63}$'),
  -- protojson text exactly as validated; kept as text so exports are byte-stable.
  content text NOT NULL,
  version integer NOT NULL DEFAULT 1 CHECK (version >= 1),
  state text NOT NULL DEFAULT 'draft' CHECK (state IN ('draft', 'released', 'archived')),
  deprecated boolean NOT NULL DEFAULT false,
  deprecated_at timestamptz,
  deprecation_message text NOT NULL DEFAULT '',
  replacement_policy_id uuid REFERENCES policies (id) ON DELETE SET NULL,
  created_by text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (replacement_policy_id IS NULL OR replacement_policy_id <> id)
);
CREATE INDEX policies_state_type_idx ON policies (state, type);

CREATE TABLE policy_bindings (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  policy_id uuid NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
  node_group_id uuid NOT NULL REFERENCES node_groups (id) ON DELETE CASCADE,
  state text NOT NULL DEFAULT 'disabled' CHECK (state IN ('enabled', 'disabled')),
  priority integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000000 AND 1000000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (policy_id, node_group_id)
);
CREATE INDEX policy_bindings_group_idx ON policy_bindings (node_group_id) WHERE state = 'enabled';

-- Latest result per (node, policy) with its per-item results.
CREATE TABLE compliance_results (
  node_id uuid NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  policy_id uuid NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
  policy_version integer NOT NULL DEFAULT 0,
  status text NOT NULL DEFAULT 'unknown'
    CHECK (status IN ('compliant', 'non_compliant', 'inapplicable', 'error', 'unknown')),
  message text NOT NULL DEFAULT '',
  -- [{schema_id, key, status, message}]
  items jsonb NOT NULL DEFAULT '[]',
  reported_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (node_id, policy_id)
);
CREATE INDEX compliance_results_policy_idx ON compliance_results (policy_id);
CREATE INDEX compliance_results_status_idx ON compliance_results (status);

-- Audit --------------------------------------------------------------------------------------------------

CREATE TABLE audit_logs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now(),
  user_id uuid REFERENCES users (id) ON DELETE SET NULL,
  username text NOT NULL DEFAULT '',
  node_id uuid REFERENCES nodes (id) ON DELETE SET NULL,
  action text NOT NULL,
  resource_type text NOT NULL DEFAULT '',
  resource_id text NOT NULL DEFAULT '',
  resource_name text NOT NULL DEFAULT '',
  outcome text NOT NULL CHECK (outcome IN ('success', 'failure', 'denied')),
  source_ip text NOT NULL DEFAULT '',
  details jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_logs_created_idx ON audit_logs (created_at DESC);
CREATE INDEX audit_logs_action_idx ON audit_logs (action);
CREATE INDEX audit_logs_resource_idx ON audit_logs (resource_type, resource_id);
CREATE INDEX audit_logs_user_idx ON audit_logs (user_id);

-- Settings (agent notifications, MFA, …): one JSON value per key.
CREATE TABLE settings (
  key text PRIMARY KEY CHECK (key ~ '^[a-z][a-z0-9_.]*$'),
  value jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text NOT NULL DEFAULT ''
);

-- Policy hub ---------------------------------------------------------------------------------------------

-- The single revision high-water mark, shared by every replica.
CREATE TABLE hub_state (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  revision bigint NOT NULL DEFAULT 0 CHECK (revision >= 0)
);
INSERT INTO hub_state (id, revision) VALUES (true, 0);

-- Event log; old rows are compacted away. node_group_ids empty = every group.
CREATE TABLE hub_events (
  revision bigint PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('resync', 'created', 'updated', 'deleted')),
  node_group_ids uuid[] NOT NULL DEFAULT '{}',
  policy_id uuid,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Replicas and the streams each one holds, so survivors can mark a dead replica's nodes offline.
CREATE TABLE server_replicas (
  id text PRIMARY KEY,
  hostname text NOT NULL DEFAULT '',
  started_at timestamptz NOT NULL DEFAULT now(),
  last_seen timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE node_streams (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  node_id uuid NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  replica_id text NOT NULL REFERENCES server_replicas (id) ON DELETE CASCADE,
  opened_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX node_streams_node_idx ON node_streams (node_id);
CREATE INDEX node_streams_replica_idx ON node_streams (replica_id);

-- Catalogues reported by agents (feed the Dconf and Polkit editors) -------------------------------------

CREATE TABLE dconf_schemas (
  schema_id text PRIMARY KEY CHECK (schema_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$'),
  path text NOT NULL DEFAULT '',
  relocatable boolean NOT NULL DEFAULT false,
  keys jsonb NOT NULL DEFAULT '[]',
  source text NOT NULL DEFAULT 'agent' CHECK (source IN ('builtin', 'agent')),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE node_dconf_schemas (
  node_id uuid NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  schema_id text NOT NULL REFERENCES dconf_schemas (schema_id) ON DELETE CASCADE,
  PRIMARY KEY (node_id, schema_id)
);

CREATE TABLE polkit_actions (
  action_id text PRIMARY KEY CHECK (action_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$'),
  description text NOT NULL DEFAULT '',
  message text NOT NULL DEFAULT '',
  vendor text NOT NULL DEFAULT '',
  default_any text NOT NULL DEFAULT '',
  default_inactive text NOT NULL DEFAULT '',
  default_active text NOT NULL DEFAULT '',
  source text NOT NULL DEFAULT 'agent' CHECK (source IN ('builtin', 'agent')),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE node_polkit_actions (
  node_id uuid NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  action_id text NOT NULL REFERENCES polkit_actions (action_id) ON DELETE CASCADE,
  PRIMARY KEY (node_id, action_id)
);
