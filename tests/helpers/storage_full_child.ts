/**
 * Child of the storage-full test: runs inside a private mount namespace where `<dir>` is a small tmpfs, so the
 * disk can really fill up. An in-process server keeps its embedded database and its data directory there; the
 * child fills the filesystem to the last byte, makes a change that needs new space, reads what the server
 * answered and logged, frees the space and makes the change again. It prints one JSON line.
 *
 * Usage (as root): unshare -m sh -c 'mount -t tmpfs -o size=160m tmpfs "$1" && exec deno run -A
 * tests/helpers/storage_full_child.ts "$1"' sh <dir>
 */
import { migrate, openPglite } from "../../server/db/mod.ts";
import { buildRoutes } from "../../server/http/routes/mod.ts";
import { toHttpError } from "../../server/http/errors.ts";
import { createTestServer } from "./app.ts";

const dir = Deno.args[0];
const db = await openPglite({ dataDir: `${dir}/db` });
await migrate(db);
const server = await createTestServer({
  db,
  logLevel: "warn",
  config: { server: { dataDir: `${dir}/data` } },
  routes: (ctx, identity) => buildRoutes(ctx, identity),
});
const out: Record<string, unknown> = {};
try {
  const admin = await server.loginAs({ superAdmin: true });
  // Random text does not compress, so storing it needs new pages of the database's files (eight values of
  // 60,000 characters: the per-value limit is 65,536).
  const random = () => {
    let text = "";
    for (const b of crypto.getRandomValues(new Uint8Array(30_000))) text += b.toString(16).padStart(2, "0");
    return text;
  };
  const policy = (name: string) => ({
    name,
    type: "Firefox",
    content: JSON.stringify({
      additional: Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`Blob${i}`, random()])),
    }),
  });

  // Fill the filesystem: large pieces first, then smaller ones down to the last block.
  const fillers: string[] = [];
  for (const size of [8 << 20, 1 << 20, 64 << 10, 4 << 10]) {
    while (true) {
      const path = `${dir}/fill-${fillers.length}`;
      try {
        await Deno.writeFile(path, new Uint8Array(size));
        fillers.push(path);
      } catch (err) {
        await Deno.remove(path).catch(() => {});
        out.fillError = (err as { code?: string }).code;
        break;
      }
    }
  }

  const full = await admin.request("POST", "/api/v1/policies/all", policy("while full"));
  out.full = { status: full.status, retryAfter: full.headers.get("retry-after"), body: full.json };

  // A file write of the data directory failing the same way maps to the same answer.
  const fileError = await Deno.writeFile(`${dir}/more`, new Uint8Array(1 << 20)).then(
    () => null,
    (e) => e,
  );
  const mapped = fileError ? toHttpError(fileError) : undefined;
  out.fileWrite = { code: fileError?.code, status: mapped?.status, errorCode: mapped?.code };

  for (const path of fillers) await Deno.remove(path);
  const after = await admin.request("POST", "/api/v1/policies/all", policy("after freeing"));
  out.after = { status: after.status };
  out.logs = server.logs;
} finally {
  await server.close();
  await db.close();
}
console.log(JSON.stringify(out));
