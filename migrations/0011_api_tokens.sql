-- API tokens for scripts: named, expiring, revocable, stored as SHA-256 only. A token acts as its user (a
-- person or a service account, users.source = 'service') with that user's current permissions.
CREATE TABLE api_tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  -- First characters of the secret, shown so an admin can tell tokens apart; never enough to use one.
  hint text NOT NULL,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  last_used_at timestamptz,
  revoked_at timestamptz,
  UNIQUE (user_id, name)
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id);
