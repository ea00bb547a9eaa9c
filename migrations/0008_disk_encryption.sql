-- Disk encryption: the LUKS inventory agents report, escrowed recovery keys (envelope-encrypted; the
-- key-encryption key lives outside the database), rotations and the tasks agents fetch.

-- Per-node facts that are not per volume.
CREATE TABLE luks_node_state (
  node_id uuid PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
  tpm2_available boolean NOT NULL DEFAULT false,
  -- Tool that owns the TPM/unlock stack (snapd, sdbootutil); empty when none.
  external_manager text NOT NULL DEFAULT '',
  reported_at timestamptz NOT NULL DEFAULT now()
);

-- One row per volume a node reported. Encrypted volumes are identified by their LUKS UUID, unencrypted
-- fixed volumes by their device path. A volume that leaves the report is kept (its escrowed key may still be
-- needed) with missing_since set. Deleting a node keeps its volumes and keys (node_id becomes NULL,
-- node_name stays) so a decommissioned disk can still be recovered.
CREATE TABLE luks_volumes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  node_id uuid REFERENCES nodes (id) ON DELETE SET NULL,
  node_name text NOT NULL,
  identity text NOT NULL CHECK (length(identity) BETWEEN 1 AND 4200),
  luks_uuid text NOT NULL DEFAULT '',
  device text NOT NULL DEFAULT '',
  mapper_name text NOT NULL DEFAULT '',
  mount_point text NOT NULL DEFAULT '',
  is_root boolean NOT NULL DEFAULT false,
  -- 0 for an unencrypted volume.
  luks_version integer NOT NULL DEFAULT 0 CHECK (luks_version IN (0, 1, 2)),
  cipher text NOT NULL DEFAULT '',
  key_size_bits integer NOT NULL DEFAULT 0,
  pbkdf text NOT NULL DEFAULT '',
  -- [{slot, kind, managed}]
  key_slots jsonb NOT NULL DEFAULT '[]',
  tpm2_enrolled boolean NOT NULL DEFAULT false,
  tpm2_pcrs integer[] NOT NULL DEFAULT '{}',
  tang_enrolled boolean NOT NULL DEFAULT false,
  -- escrowed_key_id as the agent last reported it.
  agent_key_id text NOT NULL DEFAULT '',
  -- Set while a recovery-key rotation is pending; cleared when it completes (feeds the overdue metric).
  rotation_requested_at timestamptz,
  rotation_reason text NOT NULL DEFAULT '',
  first_seen_at timestamptz NOT NULL DEFAULT now(),
  reported_at timestamptz NOT NULL DEFAULT now(),
  missing_since timestamptz,
  UNIQUE (node_id, identity)
);
CREATE INDEX luks_volumes_uuid_idx ON luks_volumes (luks_uuid) WHERE luks_uuid <> '';

-- Escrowed recovery keys. ciphertext = AES-256-GCM(data key, recovery key) with its nonce; wrapped_data_key
-- = AES-256-GCM(KEK kek_id, data key). Neither opens anything without the KEK file.
CREATE TABLE luks_recovery_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  volume_id uuid NOT NULL REFERENCES luks_volumes (id) ON DELETE CASCADE,
  -- pending: escrowed, not yet confirmed in the header; active: in force; retired: replaced (kept until
  -- the agent destroyed its keyslot); destroyed: keyslot removed; abandoned: never confirmed.
  state text NOT NULL CHECK (state IN ('pending', 'active', 'retired', 'destroyed', 'abandoned')),
  rotation_id uuid,
  key_slot integer,
  kek_id text NOT NULL,
  wrapped_data_key bytea NOT NULL,
  ciphertext bytea NOT NULL,
  reveal_count integer NOT NULL DEFAULT 0,
  last_revealed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  confirmed_at timestamptz,
  retired_at timestamptz
);
CREATE INDEX luks_recovery_keys_volume_idx ON luks_recovery_keys (volume_id, state);
CREATE UNIQUE INDEX luks_recovery_keys_one_active ON luks_recovery_keys (volume_id) WHERE state = 'active';
CREATE INDEX luks_recovery_keys_kek_idx ON luks_recovery_keys (kek_id);

-- A rotation replaces the active key of a volume; at most one is open per volume.
CREATE TABLE luks_rotations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  volume_id uuid NOT NULL REFERENCES luks_volumes (id) ON DELETE CASCADE,
  previous_key_id uuid REFERENCES luks_recovery_keys (id) ON DELETE SET NULL,
  task_id uuid,
  state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'completed')),
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE UNIQUE INDEX luks_rotations_one_open ON luks_rotations (volume_id) WHERE state = 'open';

-- Work for an agent, fetched with GetDiskEncryptionTasks; at most one pending task per volume and kind.
CREATE TABLE luks_tasks (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  node_id uuid NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  volume_id uuid NOT NULL REFERENCES luks_volumes (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('escrow', 'rotate', 'enroll_tpm2', 'enroll_tang')),
  reason text NOT NULL DEFAULT '',
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),
  created_at timestamptz NOT NULL DEFAULT now(),
  done_at timestamptz
);
CREATE UNIQUE INDEX luks_tasks_one_pending ON luks_tasks (volume_id, kind) WHERE state = 'pending';
CREATE INDEX luks_tasks_node_idx ON luks_tasks (node_id) WHERE state = 'pending';
