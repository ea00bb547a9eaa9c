-- Second factors and the states between login steps (server/auth/mfa.ts, pending_logins.ts).

-- One TOTP authenticator per user. `secret_sealed` is AES-GCM under a key derived from the server's JWT
-- secret, bound to the user id; `confirmed_at` is null until a first code proved the app has it.
-- `last_used_step` is the newest accepted time step: a code of that step or an older one is refused, so a
-- code works once, also on another replica.
CREATE TABLE user_totp (
  user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  secret_sealed text NOT NULL,
  confirmed_at timestamptz,
  last_used_step bigint,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Single-use backup codes: only the SHA-256 of each (they carry 60 random bits, so a fast hash is enough).
CREATE TABLE user_backup_codes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  code_hash text NOT NULL CHECK (code_hash ~ '^[0-9a-f]{64}$'),
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (user_id, code_hash)
);

-- Security keys and passkeys (WebAuthn), several per user, each named.
CREATE TABLE webauthn_credentials (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  credential_id text NOT NULL UNIQUE,
  public_key text NOT NULL,
  sign_count bigint NOT NULL DEFAULT 0,
  transports text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  UNIQUE (user_id, name)
);

-- The state between the password and the second factor: an opaque single-use token (only its SHA-256 here),
-- short-lived, never a session. `failures` ends it after a few wrong codes; `challenge` is a WebAuthn
-- challenge when one was issued.
CREATE TABLE pending_logins (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  user_id uuid REFERENCES users (id) ON DELETE CASCADE,
  purpose text NOT NULL CHECK (purpose IN ('second_factor', 'webauthn_register', 'webauthn_login')),
  challenge text,
  failures integer NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_logins_expires_idx ON pending_logins (expires_at);
