/**
 * Assembles the agent repository the server serves under `/agent/` (spec "Agent package repository"):
 *
 * ```
 * repo-key.asc                      public key that signs the metadata
 * manifest.json                     version, signing state, SHA-256 and size of every served file
 * deb/pool/main/s/svc-agent/*.deb   apt repository "stable main" (apt-ftparchive):
 * deb/dists/stable/{InRelease,Release,Release.gpg}, deb/dists/stable/main/binary-<arch>/Packages(.gz)
 * rpm/<arch>/*.rpm, rpm/repodata/   dnf/zypper repository (createrepo_c, SHA-256), repomd.xml.asc,
 *                                   packages signed with rpmsign as well
 * apk/*.apk, arch/*.pkg.tar.zst     direct downloads
 * ```
 *
 * @module
 */
import type { BuiltPackage } from "./package_spec.ts";
import { ARCHES } from "./targets.ts";
import { type Signer, signRpm } from "./signing.ts";
import { hexDigest } from "./stage.ts";
import { run } from "./exec.ts";
import { VERSION } from "../shared/version.ts";

/** One served file in the manifest. */
export interface ManifestFile {
  path: string;
  sha256: string;
  size: number;
}

/** One package in the manifest (also listed in `files`). */
export interface ManifestPackage {
  path: string;
  format: BuiltPackage["format"];
  arch: BuiltPackage["arch"];
}

/** `manifest.json`. */
export interface Manifest {
  version: string;
  /** True only when the apt and rpm metadata carry signatures that verify against `repo-key.asc`. */
  signed: boolean;
  signing_key: { fingerprint: string; build_local: boolean; label: string };
  arches: string[];
  packages: ManifestPackage[];
  files: ManifestFile[];
}

/** Where a package lives inside the repository. */
export function repoPath(p: BuiltPackage): string {
  const name = p.file.slice(p.file.lastIndexOf("/") + 1);
  if (p.format === "deb") return `deb/pool/main/s/${p.app}/${name}`;
  if (p.format === "rpm") return `rpm/${ARCHES.find((a) => a.name === p.arch)!.rpm}/${name}`;
  return `${p.format}/${name}`;
}

async function listFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(`${dir}/${prefix}`)) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory) out.push(...await listFiles(dir, rel));
    else if (e.isFile) out.push(rel);
  }
  return out.sort();
}

/** Builds the repository in `dir` from the agent packages, signs it with `signer`; returns the manifest. */
export async function assembleRepo(
  options: { packages: BuiltPackage[]; dir: string; signer: Signer },
): Promise<Manifest> {
  const { dir, signer } = options;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  const packages: ManifestPackage[] = [];
  for (const p of options.packages) {
    const path = repoPath(p);
    await Deno.mkdir(`${dir}/${path.slice(0, path.lastIndexOf("/"))}`, { recursive: true });
    await Deno.copyFile(p.file, `${dir}/${path}`);
    if (p.format === "rpm") await signRpm(`${dir}/${path}`, signer);
    packages.push({ path, format: p.format, arch: p.arch });
  }
  await Deno.writeTextFile(`${dir}/repo-key.asc`, signer.publicKey);

  // apt: one suite, one component, Packages per arch, then Release and its two signatures.
  const deb = `${dir}/deb`;
  const suite = `${deb}/dists/stable`;
  for (const arch of ARCHES) {
    const bin = `${suite}/main/binary-${arch.deb}`;
    await Deno.mkdir(bin, { recursive: true });
    const index = await run("apt-ftparchive", ["--arch", arch.deb, "packages", "pool"], { cwd: deb });
    await Deno.writeTextFile(`${bin}/Packages`, index);
    await run("gzip", ["-9", "-n", "-k", `${bin}/Packages`]);
  }
  const release = await run("apt-ftparchive", [
    "-o",
    "APT::FTPArchive::Release::Origin=svc",
    "-o",
    "APT::FTPArchive::Release::Label=svc agent",
    "-o",
    "APT::FTPArchive::Release::Suite=stable",
    "-o",
    "APT::FTPArchive::Release::Codename=stable",
    "-o",
    `APT::FTPArchive::Release::Architectures=${ARCHES.map((a) => a.deb).join(" ")}`,
    "-o",
    "APT::FTPArchive::Release::Components=main",
    "-o",
    `APT::FTPArchive::Release::Description=svc-agent ${VERSION}`,
    "release",
    ".",
  ], { cwd: suite });
  await Deno.writeTextFile(`${suite}/Release`, release);
  await signer.clearsign(`${suite}/Release`, `${suite}/InRelease`);
  await signer.detachSign(`${suite}/Release`, `${suite}/Release.gpg`, { armor: false });

  // rpm: one repository for both arches (dnf picks by arch), gzip metadata for older clients.
  const rpm = `${dir}/rpm`;
  await run("createrepo_c", [
    "--quiet",
    "--no-database",
    "--checksum",
    "sha256",
    "--general-compress-type",
    "gz",
    rpm,
  ]);
  await signer.detachSign(`${rpm}/repodata/repomd.xml`, `${rpm}/repodata/repomd.xml.asc`, { armor: true });
  await Deno.writeTextFile(`${rpm}/repodata/repomd.xml.key`, signer.publicKey);

  const signed = await signer.verify(`${suite}/InRelease`) &&
    await signer.verify(`${suite}/Release.gpg`, `${suite}/Release`) &&
    await signer.verify(`${rpm}/repodata/repomd.xml.asc`, `${rpm}/repodata/repomd.xml`);
  const files: ManifestFile[] = [];
  for (const path of await listFiles(dir)) {
    const data = await Deno.readFile(`${dir}/${path}`);
    files.push({ path, sha256: await hexDigest("SHA-256", data), size: data.length });
  }
  const manifest: Manifest = {
    version: VERSION,
    signed,
    signing_key: { fingerprint: signer.fingerprint, build_local: signer.buildLocal, label: signer.label },
    arches: ARCHES.map((a) => a.name),
    packages,
    files,
  };
  await Deno.writeTextFile(`${dir}/manifest.json`, JSON.stringify(manifest, null, 2) + "\n");
  return manifest;
}
