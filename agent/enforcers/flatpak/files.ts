/**
 * The files svc writes for Flatpak remotes, under `/etc/svc/flatpak/`: the signing key (ASCII-armoured) and the
 * filter of each remote, so they are tamper-watched and removed with the policy.
 *
 * @module
 */

/** Node directory of the key and filter files svc writes. */
export const FLATPAK_FILES_DIR = "/etc/svc/flatpak";

/** Node path of remote `name`'s signing key. */
export function keyPath(name: string): string {
  return `${FLATPAK_FILES_DIR}/${name}.asc`;
}

/** Node path of remote `name`'s filter. */
export function filterPath(name: string): string {
  return `${FLATPAK_FILES_DIR}/${name}.filter`;
}

/** A public key as base64 (the GPGKey form of a .flatpakrepo file) → an ASCII-armoured key block. */
export function armorKey(base64: string): string {
  const compact = base64.replace(/\s+/g, "");
  const bytes = Uint8Array.from(atob(compact), (c) => c.charCodeAt(0));
  let crc = 0xb704ce;
  for (const byte of bytes) {
    crc ^= byte << 16;
    for (let i = 0; i < 8; i++) {
      crc <<= 1;
      if (crc & 0x1000000) crc ^= 0x1864cfb;
    }
  }
  crc &= 0xffffff;
  const checksum = btoa(String.fromCharCode(crc >> 16, (crc >> 8) & 0xff, crc & 0xff));
  const lines = btoa(String.fromCharCode(...bytes)).match(/.{1,64}/g) ?? [];
  return `-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n${
    lines.join("\n")
  }\n=${checksum}\n-----END PGP PUBLIC KEY BLOCK-----\n`;
}

/** The filter file of a remote. */
export function filterText(filter: string): string {
  return `# Managed by svc: Flatpak remote filter\n${filter.trimEnd()}\n`;
}
