/**
 * The node's fixed volumes as `lsblk -J -l -p` lists them: LUKS devices with where they sit (mapper name, mount
 * point, root or not) and unencrypted fixed volumes. Removable, hot-plugged, loop, ROM and zram devices (and
 * everything below them) and the boot partitions are left out: the disk-encryption report is about the disks
 * that stay with the machine.
 *
 * @module
 */

/** An entry of `lsblk -J -l -p`. */
export interface LsblkDevice {
  name: string;
  type: string;
  fstype: string | null;
  uuid: string | null;
  mountpoint: string | null;
  rm: boolean | string | null;
  hotplug: boolean | string | null;
  pkname: string | null;
}

/** Where an LUKS device sits in the block tree: mapper name, mount point, root or not. */
export interface Placement {
  mapperName: string;
  mountPoint: string;
  root: boolean;
}

/** The columns {@linkcode devicesFromLsblk} reads. */
export const LSBLK_COLUMNS = "NAME,TYPE,FSTYPE,UUID,MOUNTPOINT,RM,HOTPLUG,PKNAME";
const BOOT_MOUNTS = new Set(["/boot", "/boot/efi", "/efi"]);
const SKIPPED_TYPES = new Set(["loop", "rom", "zram"]);

function truthy(v: boolean | string | null): boolean {
  return v === true || v === "1" || v === "true";
}

/**
 * Fixed devices from `lsblk` output: LUKS devices with their placement, and unencrypted fixed volumes (a
 * filesystem on a non-removable disk or partition, not a boot partition, not inside an opened LUKS volume).
 */
export function devicesFromLsblk(
  json: { blockdevices: LsblkDevice[] },
): { luks: Map<string, Placement>; plain: { device: string; mountPoint: string; root: boolean }[] } {
  const all = json.blockdevices;
  const children = new Map<string, LsblkDevice[]>();
  for (const d of all) {
    if (!d.pkname) continue;
    children.set(d.pkname, [...(children.get(d.pkname) ?? []), d]);
  }
  const descendants = (name: string): LsblkDevice[] => {
    const out: LsblkDevice[] = [];
    const walk = (n: string) => {
      for (const c of children.get(n) ?? []) {
        out.push(c);
        walk(c.name);
      }
    };
    walk(name);
    return out;
  };
  const byName = new Map(all.map((d) => [d.name, d]));
  const removable = (d: LsblkDevice): boolean => {
    for (let cur: LsblkDevice | undefined = d; cur; cur = cur.pkname ? byName.get(cur.pkname) : undefined) {
      if (truthy(cur.rm) || truthy(cur.hotplug) || SKIPPED_TYPES.has(cur.type)) return true;
    }
    return false;
  };
  const insideCrypt = new Set<string>();
  const luks = new Map<string, Placement>();
  for (const d of all) {
    if (d.fstype !== "crypto_LUKS" || removable(d)) continue;
    const below = descendants(d.name);
    below.forEach((b) => insideCrypt.add(b.name));
    const mapper = below.find((b) => b.type === "crypt");
    const mounts = below.map((b) => b.mountpoint).filter((m): m is string => !!m);
    luks.set(d.name, {
      mapperName: mapper ? mapper.name.replace(/^\/dev\/mapper\//, "") : "",
      mountPoint: mounts.includes("/") ? "/" : mounts[0] ?? "",
      root: mounts.includes("/"),
    });
  }
  const plain = all
    .filter((d) =>
      (d.type === "part" || d.type === "disk") && d.fstype && d.fstype !== "crypto_LUKS" &&
      d.fstype !== "swap" &&
      !insideCrypt.has(d.name) && !removable(d) && !BOOT_MOUNTS.has(d.mountpoint ?? "")
    )
    .map((d) => ({ device: d.name, mountPoint: d.mountpoint ?? "", root: d.mountpoint === "/" }));
  return { luks, plain };
}
