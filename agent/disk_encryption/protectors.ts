/**
 * Automatic-unlock protectors the DiskEncryption policy asks for, each added with the distribution's own
 * tool and the agent's unlock secret: TPM2 with `systemd-cryptenroll` (sealed against the policy's PCRs,
 * 7 when none are given) and Tang with `clevis luks bind` (each server's advertisement checked against the
 * pinned thumbprint, so a substituted server is refused; several servers under a Shamir threshold). A node
 * without the tool reports the protector INAPPLICABLE instead.
 *
 * @module
 */
import type {
  DiskEncryptionTang,
  DiskEncryptionTpm2,
} from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";
import type { RootFs } from "../fs.ts";
import type { Runner } from "../runner.ts";

/** A protector could not be added; the message says why and what to do. */
export class ProtectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtectorError";
  }
}

/** Whether the node has a TPM 2.0 (what the kernel says of its first TPM). */
export async function tpm2Present(fs: RootFs): Promise<boolean> {
  return (await fs.readTextFile("/sys/class/tpm/tpm0/tpm_version_major"))?.trim() === "2";
}

/** The tool's own words, all lines (clevis says what failed first and that binding failed last). */
function lastLine(text: string): string {
  return text.trim().split("\n").map((l) => l.trim()).filter((l) => l !== "").join(" / ").slice(0, 600);
}

/** Adds a TPM2 keyslot sealed against the policy's PCRs. */
export async function enrollTpm2(
  runner: Runner,
  device: string,
  options: { tpm2: DiskEncryptionTpm2; tpm2Device: string; unlockKeyFile: string },
): Promise<void> {
  if (options.tpm2.requirePin) {
    throw new ProtectorError(
      "the policy requires a TPM2 PIN, which a person must type: enroll it with systemd-cryptenroll --tpm2-with-pin=yes",
    );
  }
  const pcrs = options.tpm2.pcrs.length ? options.tpm2.pcrs : [7];
  const r = await runner.run("systemd-cryptenroll", [
    `--tpm2-device=${options.tpm2Device}`,
    `--tpm2-pcrs=${pcrs.join("+")}`,
    `--unlock-key-file=${options.unlockKeyFile}`,
    device,
  ], { timeoutMs: 120_000 });
  if (r.notFound) throw new ProtectorError("systemd-cryptenroll is not installed");
  if (!r.success) {
    throw new ProtectorError(`systemd-cryptenroll failed: ${lastLine(r.stderr) || `exit code ${r.code}`}`);
  }
}

/** The clevis pin configuration for the policy's Tang servers. */
export function tangPin(tang: DiskEncryptionTang): { pin: string; config: string } {
  const servers = tang.servers.map((s) => ({ url: s.url, thp: s.thumbprint }));
  const threshold = Math.max(1, tang.threshold);
  if (servers.length === 1) return { pin: "tang", config: JSON.stringify(servers[0]) };
  return { pin: "sss", config: JSON.stringify({ t: threshold, pins: { tang: servers } }) };
}

/** Binds the volume to the policy's Tang servers with clevis. */
export async function bindTang(
  runner: Runner,
  device: string,
  options: { tang: DiskEncryptionTang; unlockKeyFile: string },
): Promise<void> {
  const { pin, config } = tangPin(options.tang);
  // -y trusts the advertisement without asking: it is verified against the pinned thumbprint (thp) first.
  const r = await runner.run("clevis", [
    "luks",
    "bind",
    "-y",
    "-d",
    device,
    "-k",
    options.unlockKeyFile,
    pin,
    config,
  ], {
    timeoutMs: 120_000,
  });
  if (r.notFound) throw new ProtectorError("clevis is not installed");
  if (!r.success) {
    throw new ProtectorError(
      `clevis luks bind failed: ${lastLine(r.stderr) || lastLine(r.stdout) || `exit code ${r.code}`}`,
    );
  }
}
