/**
 * Root-prefixed file access (escapes refused, symlinks included), atomic writes, and the
 * managed-file store's backup and restore of originals.
 */
import assert from "node:assert/strict";
import { PathEscapeError, RootFs, writeFileAtomic } from "../../agent/fs.ts";
import { createLogger, SILENT_LOGGER } from "../../agent/log.ts";
import { ManagedFiles, sha256Hex } from "../../agent/sync/managed_files.ts";

async function withDirs(fn: (root: string, outside: string, base: string) => Promise<void>): Promise<void> {
  const base = await Deno.makeTempDir({ prefix: "svc-agent-fs-" });
  await Deno.mkdir(`${base}/root/etc`, { recursive: true });
  await Deno.mkdir(`${base}/outside`);
  try {
    await fn(`${base}/root`, `${base}/outside`, base);
  } finally {
    await Deno.remove(base, { recursive: true });
  }
}

Deno.test("resolve maps node paths under the root", async () => {
  await withDirs(async (root) => {
    const fs = await RootFs.open(root);
    const real = await Deno.realPath(root);
    assert.equal(
      await fs.resolve("/etc/firefox/policies/policies.json"),
      `${real}/etc/firefox/policies/policies.json`,
    );
    assert.equal(await fs.resolve("//etc///x"), `${real}/etc/x`);
  });
});

Deno.test("resolve refuses relative paths, dot components and control characters", async () => {
  await withDirs(async (root) => {
    const fs = await RootFs.open(root);
    for (
      const bad of ["etc/x", "/etc/../../x", "/etc/./x", "/etc/x\0y", "/etc/x\ny", "/etc/\x1b", "", "/.."]
    ) {
      await assert.rejects(fs.resolve(bad), PathEscapeError, JSON.stringify(bad));
    }
  });
});

Deno.test("resolve refuses symbolic links that leave the root, absolute or relative, and dangling ones", async () => {
  await withDirs(async (root, outside) => {
    const fs = await RootFs.open(root);
    await Deno.symlink(outside, `${root}/etc/abs`);
    await Deno.symlink("../../outside", `${root}/etc/rel`);
    await Deno.symlink(`${outside}/secret`, `${root}/etc/file-link`);
    await Deno.writeTextFile(`${outside}/secret`, "s3cret");
    await Deno.symlink(`${root}/nowhere/x`, `${root}/etc/dangling`);
    await assert.rejects(fs.resolve("/etc/abs/policies.json"), /outside the root/);
    await assert.rejects(fs.resolve("/etc/rel/policies.json"), /outside the root/);
    await assert.rejects(fs.resolve("/etc/file-link"), /outside the root/);
    await assert.rejects(fs.resolve("/etc/dangling"), /dangling symbolic link/);
    // Writing through any of them is refused and leaves the outside untouched.
    await assert.rejects(fs.writeFileAtomic("/etc/abs/policies.json", "x"), PathEscapeError);
    await assert.rejects(fs.writeFileAtomic("/etc/file-link", "x"), PathEscapeError);
    assert.deepEqual(await Array.fromAsync(Deno.readDir(outside), (e) => e.name), ["secret"]);
    assert.equal(await Deno.readTextFile(`${outside}/secret`), "s3cret");
    assert.equal(await fs.readTextFile("/etc/file-link").catch((e) => e.name), "PathEscapeError");
  });
});

Deno.test("symbolic links that stay inside the root are followed", async () => {
  await withDirs(async (root) => {
    const fs = await RootFs.open(root);
    await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
    await Deno.symlink(`${root}/usr/lib/firefox`, `${root}/etc/firefox`);
    await fs.writeFileAtomic("/etc/firefox/policies.json", "{}");
    assert.equal(await Deno.readTextFile(`${root}/usr/lib/firefox/policies.json`), "{}");
    assert.equal(await fs.exists("/etc/firefox/policies.json"), true);
  });
});

Deno.test("atomic write replaces content whole, sets the mode, leaves no temp file", async () => {
  await withDirs(async (root) => {
    const fs = await RootFs.open(root);
    await fs.writeFileAtomic("/etc/a/b/file", "one", { mode: 0o600 });
    await fs.writeFileAtomic("/etc/a/b/file", "two");
    assert.equal(await Deno.readTextFile(`${root}/etc/a/b/file`), "two");
    assert.equal((await Deno.stat(`${root}/etc/a/b/file`)).mode! & 0o777, 0o644);
    assert.deepEqual(await fs.readDir("/etc/a/b"), ["file"]);
    // A failed write (target is a directory) removes its temp file and keeps the old state.
    await Deno.mkdir(`${root}/etc/a/dir`);
    await assert.rejects(writeFileAtomic(`${root}/etc/a/dir`, "x"));
    assert.deepEqual(await fs.readDir("/etc/a"), ["b", "dir"]);
  });
});

Deno.test("managed files: original backed up outside the managed directory and restored with its mode", async () => {
  await withDirs(async (root, _outside, base) => {
    const fs = await RootFs.open(root);
    await Deno.writeTextFile(`${root}/etc/app.conf`, "original\n");
    await Deno.chmod(`${root}/etc/app.conf`, 0o640);
    const store = await ManagedFiles.load(`${base}/data`, SILENT_LOGGER);
    assert.equal(await store.write(fs, { path: "/etc/app.conf", type: "T", content: "managed 1\n" }), true);
    assert.equal(await store.write(fs, { path: "/etc/app.conf", type: "T", content: "managed 1\n" }), false);
    assert.equal(await store.write(fs, { path: "/etc/app.conf", type: "T", content: "managed 2\n" }), true);
    assert.deepEqual(await fs.readDir("/etc"), ["app.conf"], "no backup next to the file");
    const record = store.get("/etc/app.conf")!;
    assert.equal(record.sha256, await sha256Hex("managed 2\n"));
    assert.equal(record.original.existed, true);
    assert.equal(
      (await Deno.stat(`${base}/data/state/backups/${record.original.backup}`)).mode! & 0o777,
      0o600,
    );
    await assert.rejects(
      store.write(fs, { path: "/etc/app.conf", type: "Other", content: "x" }),
      /already managed by policy type T/,
    );

    // Reloaded from disk (agent restart), the record still knows the original.
    const reloaded = await ManagedFiles.load(`${base}/data`, SILENT_LOGGER);
    assert.deepEqual(reloaded.list(), store.list());
    assert.equal(await reloaded.release(fs, "/etc/app.conf"), true);
    assert.equal(await Deno.readTextFile(`${root}/etc/app.conf`), "original\n");
    assert.equal((await Deno.stat(`${root}/etc/app.conf`)).mode! & 0o777, 0o640);
    assert.deepEqual(await Array.fromAsync(Deno.readDir(`${base}/data/state/backups`)), []);
    assert.equal(reloaded.list().length, 0);
  });
});

Deno.test("managed files: no original → removed on release; svc's own leftover is not taken for an original", async () => {
  await withDirs(async (root, _outside, base) => {
    const fs = await RootFs.open(root);
    const store = await ManagedFiles.load(`${base}/data`, SILENT_LOGGER);
    await store.write(fs, { path: "/etc/new.conf", type: "T", content: "x" });
    assert.equal(await store.release(fs, "/etc/new.conf"), true);
    assert.equal(await fs.exists("/etc/new.conf"), false);

    // State lost, but the file on disk carries svc's marker: it is not backed up as an original.
    await Deno.writeTextFile(`${root}/etc/left.conf`, "# managed by svc\nold");
    const fresh = await ManagedFiles.load(`${base}/data2`, SILENT_LOGGER);
    await fresh.write(fs, {
      path: "/etc/left.conf",
      type: "T",
      content: "# managed by svc\nnew",
      isOwnContent: (t) => t.startsWith("# managed by svc"),
    });
    assert.equal(fresh.get("/etc/left.conf")?.original.existed, false);
    await fresh.release(fs, "/etc/left.conf");
    assert.equal(await fs.exists("/etc/left.conf"), false);
  });
});

Deno.test("managed files: a corrupt state file is moved aside, not trusted", async () => {
  await withDirs(async (_root, _outside, base) => {
    await Deno.mkdir(`${base}/data/state`, { recursive: true });
    await Deno.writeTextFile(`${base}/data/state/managed-files.json`, "{broken");
    const lines: string[] = [];
    const store = await ManagedFiles.load(`${base}/data`, createLogger({ sink: (l) => lines.push(l) }));
    assert.equal(store.list().length, 0);
    const names = await Array.fromAsync(Deno.readDir(`${base}/data/state`), (e) => e.name);
    assert.ok(names.some((n) => n.startsWith("managed-files.json.corrupt-")));
    assert.match(lines.join("\n"), /managed-file state is unreadable/);
  });
});
