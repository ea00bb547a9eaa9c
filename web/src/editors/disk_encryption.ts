/**
 * Editor of the DiskEncryption policy type: the generated form, grouped into the volume requirements, the
 * recovery-key escrow, and the TPM2 and Tang protector sections, with labels, ranges and allowed values
 * (the server validates the same rules in shared/policy_types/disk_encryption.ts).
 */
import type { EditorSpec } from "./spec.ts";

const REQUIREMENTS = "Volume requirements";
const ESCROW = "Recovery key";
const TPM2 = "TPM2 protector";
const TANG = "Tang protector";

/** The DiskEncryption editor. */
export const diskEncryptionEditor: EditorSpec = {
  hints: {
    catalogue: {
      groups: [REQUIREMENTS, ESCROW, TPM2, TANG],
      fieldInfo: {
        requireEncryption: {
          group: REQUIREMENTS,
          label: "Require encryption",
          description:
            "The root volume and other fixed volumes must be LUKS-encrypted (never encrypted in place).",
        },
        minLuksVersion: {
          group: REQUIREMENTS,
          label: "Minimum LUKS version",
          description: "Oldest accepted LUKS header version.",
          enum: [{ value: 0, label: "Any" }, { value: 1, label: "LUKS1" }, { value: 2, label: "LUKS2" }],
        },
        allowedCiphers: {
          group: REQUIREMENTS,
          label: "Allowed ciphers",
          description: "Ciphers in cryptsetup notation, e.g. aes-xts-plain64; empty accepts any.",
        },
        minKeySizeBits: {
          group: REQUIREMENTS,
          label: "Minimum key size",
          description: "Volume key size; 512 bits is AES-256 in XTS mode; 0 means no minimum.",
          min: 0,
          max: 4096,
          unit: "bits",
        },
        escrowRecoveryKey: {
          group: ESCROW,
          label: "Escrow a recovery key",
          description:
            "The agent creates a recovery key per volume, stores it on this server first, then adds it to the header.",
        },
        recoveryKeyRotationDays: {
          group: ESCROW,
          label: "Rotate after",
          description: "Replace escrowed recovery keys after this many days; 0 never rotates by age.",
          min: 0,
          max: 3650,
          unit: "days",
        },
        rotateAfterReveal: {
          group: ESCROW,
          label: "Rotate after a reveal",
          description: "A revealed key is replaced at the node's next contact, so it never stays valid.",
        },
        tpm2: {
          group: TPM2,
          label: "TPM2",
          description: "Automatic unlock with the node's TPM 2.0 (systemd-cryptenroll); unset means none.",
        },
        "tpm2.enroll": {
          label: "Enroll a TPM2 keyslot",
          description: "Add a TPM2 keyslot to each required volume.",
        },
        "tpm2.pcrs": {
          label: "PCRs",
          description:
            "PCRs the key is sealed against, e.g. 7 (Secure Boot state) or 7 and 14; empty means 7.",
          min: 0,
          max: 23,
        },
        "tpm2.requirePin": { label: "Require a PIN", description: "Ask for a PIN at boot as well." },
        tang: {
          group: TANG,
          label: "Tang",
          description: "Network-bound unlock through Tang servers (clevis); unset means none.",
        },
        "tang.servers": {
          label: "Servers",
          description: "Tang servers with their pinned signing-key thumbprints.",
        },
        "tang.servers[].url": {
          label: "URL",
          description: "e.g. http://tang.example.com",
          format: "url",
        },
        "tang.servers[].thumbprint": {
          label: "Thumbprint",
          description:
            "Advertisement signing-key thumbprint (tang-show-keys); a substituted server is refused.",
        },
        "tang.threshold": {
          label: "Threshold",
          description: "How many servers must answer to unlock; 0 means 1.",
          min: 0,
          max: 16,
        },
      },
    },
  },
};
