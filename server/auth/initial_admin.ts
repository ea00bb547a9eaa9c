/**
 * First start: when there are no users at all, create the Super Admin `admin`. Its password comes from
 * `SVC_ADMIN_PASSWORD` (security.admin_password) or is generated, printed once to stdout and written to
 * `{data_dir}/initial_admin_password` (0600). The file is written before the user is committed, so a
 * failure leaves no account whose password nobody knows.
 */
import { join } from "node:path";
import type { ServerContext } from "../context.ts";
import { SUPER_ADMIN } from "./builtin_roles.ts";
import { checkPasswordRules, generatePassword } from "./password.ts";
import { builtinRoleId } from "./rbac.ts";
import { createUser } from "./users.ts";
import { createBinding } from "./role_bindings.ts";

/** Name of the file holding a generated initial password. */
export const INITIAL_PASSWORD_FILE = "initial_admin_password";
/** Username of the initial admin. */
export const INITIAL_ADMIN = "admin";

/** Creates the initial admin when the users table is empty; returns whether it did. */
export async function ensureInitialAdmin(
  ctx: ServerContext,
  options: { print?: (line: string) => void } = {},
): Promise<boolean> {
  const configured = ctx.config.security.adminPassword;
  if (configured) {
    try {
      checkPasswordRules(configured);
    } catch (err) {
      throw new Error(`SVC_ADMIN_PASSWORD (security.admin_password): ${(err as Error).message}`);
    }
  }
  const password = configured || generatePassword();
  const file = join(ctx.config.server.dataDir, INITIAL_PASSWORD_FILE);
  const created = await ctx.db.transaction(async (tx) => {
    await tx.query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE");
    const [{ n }] = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM users");
    if (n > 0) return false;
    const user = await createUser(tx, { username: INITIAL_ADMIN, password, fullName: "Administrator" });
    await createBinding(tx, {
      subject: { userId: user.id },
      roleId: await builtinRoleId(tx, SUPER_ADMIN),
      scopeType: "global",
    });
    if (!configured) {
      await Deno.mkdir(ctx.config.server.dataDir, { recursive: true, mode: 0o700 });
      // A stale file from an earlier install may have looser permissions: replace it, never rewrite it.
      await Deno.remove(file).catch(() => {});
      await Deno.writeTextFile(file, `${password}\n`, { mode: 0o600, createNew: true });
    }
    return true;
  });
  if (!created) return false;
  if (configured) {
    ctx.log.info("auth: initial admin created with the password from SVC_ADMIN_PASSWORD", {
      username: INITIAL_ADMIN,
    });
  } else {
    (options.print ?? console.log)(`svc: initial admin login: ${INITIAL_ADMIN} / ${password}`);
    ctx.log.info("auth: initial admin created; its password was printed once and saved", { file });
  }
  return true;
}
