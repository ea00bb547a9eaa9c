/**
 * What a disk-encryption report says about one volume, as far as the agent's inventory
 * (agent/disk_encryption/inventory.ts) and the server's escrow (server/disk_encryption/escrow.ts) describe it
 * the same way; each adds its own keyslot list and bookkeeping.
 *
 * @module
 */

/** One volume's LUKS header and unlocking facts (an unencrypted volume has `luksVersion` 0). */
export interface VolumeFacts {
  /** Node path as reported, e.g. /dev/nvme0n1p3. */
  device: string;
  uuid: string;
  mapperName: string;
  mountPoint: string;
  root: boolean;
  /** 0 when not encrypted. */
  luksVersion: number;
  cipher: string;
  keySizeBits: number;
  pbkdf: string;
  tpm2Enrolled: boolean;
  tpm2Pcrs: number[];
  tangEnrolled: boolean;
}
