/**
 * The built packages pass Debian's `lintian` and `rpmlint` with no error, and every warning they print is
 * one docs/operations/packaging.md accepts with a reason (a new warning fails until it is fixed or
 * documented). Runs on the artifacts of `deno task build --portable` in `dist/`; CI builds them and sets
 * SVC_REQUIRE_PACKAGES=1, so a missing build or linter fails there instead of skipping.
 */
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url).pathname;
const DIST = `${ROOT}dist/`;
const REQUIRED = Deno.env.get("SVC_REQUIRE_PACKAGES") === "1";

async function which(tool: string): Promise<boolean> {
  const out = await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" }).output();
  return out.success;
}

async function missing(): Promise<string | undefined> {
  if (!await Deno.stat(`${DIST}build.json`).then(() => true, () => false)) {
    return "dist/build.json is absent: run `deno task build --portable` first (CI does)";
  }
  const absent = [];
  for (const tool of ["lintian", "rpmlint"]) if (!await which(tool)) absent.push(tool);
  if (absent.length) {
    return `missing ${absent.join(", ")} (Debian packages of the same names; .ci/run installs them)`;
  }
  return undefined;
}

const reason = await missing();
if (reason && REQUIRED) throw new Error(`package lint cannot run but SVC_REQUIRE_PACKAGES=1: ${reason}`);
if (reason) console.error(`package_lint_test: skipped: ${reason}`);

/** Tags docs/operations/packaging.md accepts, per tool (its table's first two columns). */
async function acceptedWarnings(): Promise<Record<string, Set<string>>> {
  const doc = await Deno.readTextFile(`${ROOT}docs/operations/packaging.md`);
  const accepted: Record<string, Set<string>> = { lintian: new Set(), rpmlint: new Set() };
  for (const m of doc.matchAll(/^\| (lintian|rpmlint) +\| `([^`]+)` +\|/gm)) accepted[m[1]].add(m[2]);
  assert.ok(
    accepted.lintian.size > 0 && accepted.rpmlint.size > 0,
    "the docs table is where the test reads it",
  );
  return accepted;
}

async function lint(
  tool: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command(tool, {
    args,
    stdout: "piped",
    stderr: "piped",
    env: { LC_ALL: "C.UTF-8", ...env },
  }).output();
  const d = new TextDecoder();
  return { code: out.code, out: d.decode(out.stdout) + d.decode(out.stderr) };
}

Deno.test({
  name: "lintian and rpmlint: no error on any package, only the documented warnings",
  ignore: reason !== undefined,
  async fn() {
    const build = JSON.parse(await Deno.readTextFile(`${DIST}build.json`));
    const files: string[] = build.packages.map((p: string) => `${DIST}${p}`);
    const debs = files.filter((f) => f.endsWith(".deb"));
    const rpms = files.filter((f) => f.endsWith(".rpm"));
    assert.ok(debs.length >= 4 && rpms.length >= 4, `the build lists its debs and rpms: ${files.join(", ")}`);
    const accepted = await acceptedWarnings();

    const lintian = await lint("lintian", ["--fail-on", "error", "--tag-display-limit", "0", ...debs]);
    const lintianTags = [...lintian.out.matchAll(/^([EWX]): (\S+?)(?: \S+)?: (\S+)/gm)];
    const lintianErrors = lintianTags.filter((m) => m[1] === "E").map((m) => m[0]);
    assert.deepEqual(lintianErrors, [], `lintian errors:\n${lintian.out}`);
    assert.equal(lintian.code, 0, `lintian failed:\n${lintian.out}`);
    const newLintian = lintianTags.filter((m) => !accepted.lintian.has(m[3])).map((m) => m[0]);
    assert.deepEqual(newLintian, [], "lintian warnings not in docs/operations/packaging.md");

    // rpmlint checks each signature against rpm's keyring: a private one (through HOME's .rpmmacros) that
    // trusts only this build's repository key, so a package signed by anything else is an error.
    const home = await Deno.makeTempDir({ prefix: "svc-rpmlint-" });
    await Deno.writeTextFile(`${home}/.rpmmacros`, `%_dbpath ${home}/rpmdb\n`);
    const keyring = await lint("rpm", [
      "--dbpath",
      `${home}/rpmdb`,
      "--import",
      `${DIST}agent-repo/repo-key.asc`,
    ]);
    assert.equal(keyring.code, 0, keyring.out);
    const rpmlint = await lint("rpmlint", ["-c", `${ROOT}packaging/lint/rpmlint.toml`, ...rpms], {
      HOME: home,
    });
    await Deno.remove(home, { recursive: true });
    const rpmTags = [...rpmlint.out.matchAll(/^(\S+): ([EW]): (\S+)/gm)];
    const rpmErrors = rpmTags.filter((m) => m[2] === "E").map((m) => m[0]);
    assert.deepEqual(rpmErrors, [], `rpmlint errors:\n${rpmlint.out}`);
    assert.equal(rpmlint.code, 0, `rpmlint failed:\n${rpmlint.out}`);
    assert.match(rpmlint.out, new RegExp(`${rpms.length} packages and 0 specfiles checked; 0 errors`));
    const newRpm = rpmTags.filter((m) => !accepted.rpmlint.has(m[3])).map((m) => m[0]);
    assert.deepEqual(newRpm, [], "rpmlint warnings not in docs/operations/packaging.md");
  },
});
