/**
 * A full disk under the embedded database and the data directory (a real tmpfs filled to the last block, in a
 * private mount namespace): a change that needs space is a 507 `storage_full` with `Retry-After`, never a 500,
 * the server log says so once, a file write failing with ENOSPC maps to the same answer, and writes work again
 * as soon as space is freed.
 */
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import { toHttpError } from "../../server/http/errors.ts";
import { grpcErrorOf } from "../../server/grpc/errors.ts";

const CHILD = new URL("../helpers/storage_full_child.ts", import.meta.url).pathname;
const skip = Deno.uid?.() !== 0
  ? "not root (mounting a tmpfs in a private mount namespace needs root)"
  : await Deno.stat("/usr/bin/unshare").then(() => undefined, () => "unshare (util-linux) is not installed");
if (skip) console.log(`skipped: storage full: ${skip}`);

Deno.test({
  name:
    "storage full: writes answer 507 storage_full with Retry-After, logged once; space freed, writes work",
  ignore: skip !== undefined,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "svc-full-" });
    try {
      const run = await new Deno.Command("unshare", {
        args: [
          "-m",
          "sh",
          "-c",
          'mount -t tmpfs -o size=160m tmpfs "$1" && exec "$2" run -A --no-check=remote "$3" "$1"',
          "sh",
          dir,
          Deno.execPath(),
          CHILD,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stdout = new TextDecoder().decode(run.stdout);
      const stderr = new TextDecoder().decode(run.stderr);
      assert.equal(run.code, 0, `child failed:\n${stdout}\n${stderr}`);
      const out = JSON.parse(stdout.trim().split("\n").at(-1)!);
      assert.equal(out.fillError, "ENOSPC", "the filesystem really filled up");
      assert.equal(out.full.status, 507, JSON.stringify(out.full));
      assert.equal(out.full.body.error.code, "storage_full");
      assert.match(out.full.body.error.message, /storage is full.*free space/);
      assert.equal(out.full.retryAfter, "60");
      assert.deepEqual(out.fileWrite, { code: "ENOSPC", status: 507, errorCode: "storage_full" });
      assert.equal(out.after.status, 201, "writes work again once space is freed");
      const logs: string[] = out.logs;
      assert.equal(logs.filter((l) => / ERROR storage full: /.test(l)).length, 1, logs.join("\n"));
      assert.deepEqual(logs.filter((l) => /unhandled error/.test(l)), []);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

dbTest(
  "PostgreSQL's disk_full, as its driver raises it, is 507 storage_full over REST and UNAVAILABLE over gRPC",
  async (_db, _t, info) => {
    // The server raises the real error (SQLSTATE 53100) through the real driver; only its cause is staged.
    const err = await info.db.query(
      "DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$",
    )
      .then(() => undefined, (e) => e);
    assert.equal(err?.code, "53100", String(err));
    const mapped = toHttpError(err);
    assert.deepEqual([mapped?.status, mapped?.code, mapped?.headers?.["Retry-After"]], [
      507,
      "storage_full",
      "60",
    ]);
    assert.equal(grpcErrorOf(err)?.code, grpc.status.UNAVAILABLE);
  },
  { drivers: ["postgres"] },
);
