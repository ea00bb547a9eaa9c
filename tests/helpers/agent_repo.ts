/**
 * A small agent repository laid out the way `deno task build` writes one (files plus a `manifest.json`
 * listing them, the packages and the signing key), for tests of what the server and the console make of it.
 * The bytes are placeholders: the real build and real package managers are tests/e2e/install_test.ts's.
 */
import { VERSION } from "../../shared/version.ts";

/** A package the manifest lists: its path in the repository, format and architecture. */
export interface RepoPackage {
  path: string;
  format: string;
  arch: string;
}

/** What {@link writeAgentRepo} lays out. */
export interface AgentRepoOptions {
  /** Every file, by path in the repository, with its text; each is listed in the manifest. */
  files: Record<string, string>;
  packages: RepoPackage[];
  /** Whether the repository was signed with a key made on the build machine (else a release key). */
  buildLocal: boolean;
  arches?: string[];
}

/** A placeholder of the repository's public key as the build exports it. */
export const FAKE_REPO_KEY =
  "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBFAKEKEY\n-----END PGP PUBLIC KEY BLOCK-----\n";

/** Writes the repository into a new temporary directory and answers its path. */
export async function writeAgentRepo(options: AgentRepoOptions): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "svc-agent-repo-" });
  const list = [];
  for (const [path, text] of Object.entries(options.files)) {
    await Deno.mkdir(`${dir}/${path.slice(0, path.lastIndexOf("/") + 1) || "."}`, { recursive: true });
    await Deno.writeTextFile(`${dir}/${path}`, text);
    list.push({ path, sha256: "0".repeat(64), size: text.length });
  }
  await Deno.writeTextFile(
    `${dir}/manifest.json`,
    JSON.stringify({
      version: VERSION,
      signed: true,
      signing_key: options.buildLocal
        ? { fingerprint: "X", build_local: true, label: "build-local" }
        : { fingerprint: "X", build_local: false, label: "release" },
      arches: options.arches ?? ["amd64", "arm64"],
      packages: options.packages,
      files: list,
    }),
  );
  return dir;
}
