-- Login throttling shared by every replica: one row per counted key. `scope` is 'address' (all attempts
-- from one client address), 'account_address' (one account from one address) or 'account' (one account
-- from anywhere); `key` is a SHA-256 hex digest of the scope's value, so user-chosen text never reaches
-- the table. `attempts` counts attempts that did not succeed within the window ending `window` after
-- `last_attempt_at` (an attempt counts as soon as it starts, so concurrent guesses cannot slip past the
-- limit, and is taken back when the password was right).
CREATE TABLE login_throttle (
  scope text NOT NULL CHECK (scope IN ('address', 'account_address', 'account')),
  key text NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  last_attempt_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, key)
);
CREATE INDEX login_throttle_last_attempt_idx ON login_throttle (last_attempt_at);

-- Refresh-token grace (server/auth/sessions.ts): two tabs refreshing at once present the same token. The
-- loser, arriving within the grace period, receives the successor the winner created. The successor is kept
-- sealed with a key derived from the token it replaced, so only a holder of that token can open it; the
-- table alone reveals no usable token.
ALTER TABLE refresh_tokens ADD COLUMN successor_sealed text;
