/**
 * Debian packages with the real `dpkg-deb`: a staged tree plus `DEBIAN/` (control, conffiles, md5sums,
 * maintainer scripts), owned by root.
 *
 * @module
 */
import type { PackageSpec } from "./package_spec.ts";
import { PACKAGE_META } from "./targets.ts";
import { debChangelog, debCopyright, lintianOverrides, wrap } from "./notices.ts";
import { debScripts } from "./scripts.ts";
import { stageTree } from "./stage.ts";
import { run } from "./exec.ts";

/** File name of a deb. */
export function debFileName(spec: Pick<PackageSpec, "name" | "version" | "release" | "arch">): string {
  return `${spec.name}_${spec.version}-${spec.release}_${spec.arch.deb}.deb`;
}

/** Builds `spec` as a deb in `out`; returns its path. */
export async function writeDeb(
  spec: PackageSpec,
  options: { out: string; workDir: string },
): Promise<string> {
  const root = `${options.workDir}/root`;
  const size = await stageTree(spec.entries, root);
  const doc = `${root}/usr/share/doc/${spec.name}`;
  await Deno.mkdir(doc, { recursive: true });
  await Deno.writeTextFile(`${doc}/copyright`, debCopyright(spec));
  await Deno.writeTextFile(`${doc}/changelog.Debian`, debChangelog(spec));
  await run("gzip", ["-9n", `${doc}/changelog.Debian`]);
  const overrides = lintianOverrides(spec);
  if (overrides) {
    await Deno.mkdir(`${root}/usr/share/lintian/overrides`, { recursive: true });
    await Deno.writeTextFile(`${root}/usr/share/lintian/overrides/${spec.name}`, overrides);
  }
  const control = `${root}/DEBIAN`;
  await Deno.mkdir(control, { mode: 0o755 });
  const relations = {
    "svc-agent": ["Depends: libc6, libgcc-s1", "Recommends: systemd"],
    // The server runs without the agent repository (its wizard then says how to install it), so the
    // repository is recommended, unversioned: a server upgrade alone does not fetch the agents again.
    "svc-server": ["Depends: libc6, libgcc-s1, passwd", "Recommends: systemd, svc-agent-repo"],
    "svc-agent-repo": ["Enhances: svc-server"],
  }[spec.name];
  await Deno.writeTextFile(
    `${control}/control`,
    [
      `Package: ${spec.name}`,
      `Version: ${spec.version}-${spec.release}`,
      `Architecture: ${spec.arch.deb}`,
      `Maintainer: ${PACKAGE_META.maintainer}`,
      `Installed-Size: ${Math.ceil(size / 1024)}`,
      ...relations,
      `Section: admin`,
      `Priority: optional`,
      `Description: ${spec.summary}`,
      ...wrap(spec.description).map((l) => ` ${l}`),
      "",
    ].join("\n"),
  );
  const conffiles = spec.entries.filter((e) => e.conffile).map((e) => e.path);
  if (conffiles.length > 0) await Deno.writeTextFile(`${control}/conffiles`, conffiles.join("\n") + "\n");
  const sums = await run("sh", [
    "-c",
    'find . -path ./DEBIAN -prune -o -type f -printf "%P\\0" | sort -z | xargs -0 -r md5sum',
  ], { cwd: root });
  await Deno.writeTextFile(`${control}/md5sums`, sums);
  const scripts = spec.name === "svc-agent-repo" ? {} : debScripts(spec.name);
  for (const [name, body] of Object.entries(scripts)) {
    await Deno.writeTextFile(`${control}/${name}`, body);
    await Deno.chmod(`${control}/${name}`, 0o755);
  }
  const file = `${options.out}/${debFileName(spec)}`;
  // gzip: every dpkg reads it, and Debian's lintian checks it (lintian 2.116 rejects zstd members).
  // The repository's content is compressed packages already: a light level saves build time, not bytes.
  const compression = ["-Zgzip", spec.name === "svc-agent-repo" ? "-z1" : "-z6"];
  await run("dpkg-deb", ["--root-owner-group", ...compression, "--build", root, file], {
    env: { SOURCE_DATE_EPOCH: String(spec.mtime) },
  });
  return file;
}
