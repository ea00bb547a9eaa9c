/**
 * A new operator's first start: `git clone` into an empty directory, an empty Deno cache, `deno task start`.
 * It prints the task line, the server's own log lines and the login box, nothing else (no package
 * installation, no build-script warning), and fetches none of the test or build tools. Run from a clone
 * of HEAD, never from this checkout, whose node_modules would hide an install.
 */
import assert from "node:assert/strict";
import { LOGIN_BOX_END, startTask } from "../helpers/task_start.ts";

const OPTS = { sanitizeResources: false, sanitizeOps: false };
const REPO = new URL("../../", import.meta.url).pathname;
/** Downloading the server's packages into an empty cache on a loaded machine: minutes, not seconds. */
const FIRST_START_DEADLINE_MS = 600_000;
/** Packages only the tests, the web build or the protobuf generator use. */
const NOT_FOR_THE_SERVER = ["puppeteer-core", "axe-core", "fast-check", "acorn", "@shoelace-style", "lit"];

const isGitCheckout = await Deno.stat(`${REPO}.git`).then(() => true, () => false);

async function git(args: string[], cwd?: string): Promise<string> {
  const out = await new Deno.Command("git", { args, cwd, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.ok(out.success, `git ${args.join(" ")}: ${text}`);
  return text;
}

Deno.test({
  name:
    "deno task start on a fresh clone with an empty Deno cache prints only the server's lines and the login",
  ignore: !isGitCheckout,
  ...OPTS,
  async fn() {
    const tmp = await Deno.makeTempDir({ prefix: "svc-fresh-clone-" });
    const clone = `${tmp}/svc`;
    const denoDir = `${tmp}/deno-dir`;
    await git(["clone", "--quiet", "--no-hardlinks", REPO, clone]);
    const task = startTask({
      args: ["task", "start"],
      cwd: clone,
      env: { DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: "1" },
    });
    const out = task.output;
    try {
      await task.loginBox(FIRST_START_DEADLINE_MS);
      const [stdout, stderr] = [task.stdout(), task.stderr()];
      assert.match(stdout, LOGIN_BOX_END, `the login box is printed:\n${out()}`);
      assert.match(stdout, /initial admin login: admin \/ \S{12,}/, out());

      // stdout: the login box and nothing else.
      for (const line of stdout.trimEnd().split("\n")) {
        assert.match(
          line,
          /^[┌│└]/,
          `only the login box on stdout, found ${JSON.stringify(line)}:\n${out()}`,
        );
      }
      // stderr: Deno's one-line echo of the task, then the server's own log lines.
      const [taskLine, ...logLines] = stderr.trimEnd().split("\n");
      assert.match(taskLine, /^Task start deno run /, out());
      assert.ok(logLines.length > 0, out());
      for (const line of logLines) {
        assert.match(
          line,
          /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO /,
          `only the server's own informational lines on stderr, found ${JSON.stringify(line)}:\n${out()}`,
        );
      }
      assert.match(stderr, /svc-server started/, out());

      // Nothing was installed into the clone, and none of the tools the server does not run was fetched.
      assert.ok(!await Deno.stat(`${clone}/node_modules`).then(() => true, () => false), "no node_modules");
      const cached = new Set<string>();
      for await (const e of Deno.readDir(`${denoDir}/npm/registry.npmjs.org`)) cached.add(e.name);
      assert.ok(cached.has("hono"), `the server's packages are in the fresh cache: ${[...cached]}`);
      for (const name of NOT_FOR_THE_SERVER) assert.ok(!cached.has(name), `${name} was downloaded`);
      assert.equal(await git(["status", "--porcelain"], clone), "", "the start leaves the clone unchanged");
    } finally {
      await task.stop();
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "server/start.lock holds deno.lock's pins for exactly the server's packages",
  ...OPTS,
  async fn() {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "server/start_lock.ts", "--check"],
      cwd: REPO,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
  },
});
