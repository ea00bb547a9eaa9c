-- Server-wide secrets shared by every replica: the internal CA (certificate in clear, private key sealed)
-- and the session signing secret when security.jwt_secret is not set. Each secret is sealed with AES-256-GCM
-- under a key-encryption key from the configuration (ca.key_encryption_key_file), never stored in the
-- database; the row name is bound into the seal as additional data. The first replica to insert a row wins
-- (INSERT … ON CONFLICT DO NOTHING), so replicas starting at once end with one CA and one secret.
CREATE TABLE server_secrets (
  name text PRIMARY KEY CHECK (name ~ '^[a-z0-9_]{1,64}$'),
  -- Public part (the CA certificate chain as PEM), empty when the secret has none.
  public_pem text NOT NULL DEFAULT '',
  -- Id of the key-encryption key that sealed `sealed` (first field of a line of the key file).
  kek_id text NOT NULL,
  -- 12-byte nonce followed by the AES-GCM ciphertext and tag.
  sealed bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- ACME HTTP-01 answers, written by the replica that placed the order and served by whichever replica the
-- certificate authority's validation request reaches.
CREATE TABLE acme_challenges (
  token text PRIMARY KEY CHECK (token ~ '^[A-Za-z0-9_-]{1,255}$'),
  key_authorization text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- One replica at a time orders or renews the ACME certificate: it holds this lease until done or expired.
CREATE TABLE acme_lease (
  id smallint PRIMARY KEY CHECK (id = 1),
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);
