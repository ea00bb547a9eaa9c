/**
 * First start: when there are no users at all, create the Super Admin `admin`. Its password comes from
 * `SVC_ADMIN_PASSWORD` (security.admin_password) or is generated and written to
 * `{data_dir}/initial_admin_password` (0600). The file is written before the user is committed, so a
 * failure leaves no account whose password nobody knows.
 *
 * What the operator is told ({@link initialAdminNotice}) is printed by the server as the last thing of its
 * start, once the URL answers: the login on the first start, and on every later start a reminder of where the
 * password is, until the admin has changed it (then the file is stale and is removed).
 */
import { join } from "node:path";
import type { ServerContext } from "../context.ts";
import { SUPER_ADMIN } from "../../shared/builtin_roles.ts";
import { checkPasswordRules, generatePassword } from "./password.ts";
import { builtinRoleId } from "./rbac.ts";
import { createUser } from "./users.ts";
import { verifyPassword } from "./password.ts";
import { createBinding } from "./role_bindings.ts";

/** Name of the file holding a generated initial password. */
export const INITIAL_PASSWORD_FILE = "initial_admin_password";
/** Username of the initial admin. */
export const INITIAL_ADMIN = "admin";

/** Creates the initial admin when the users table is empty; returns whether it did. */
export async function ensureInitialAdmin(ctx: ServerContext): Promise<boolean> {
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
    ctx.log.info("auth: initial admin created; its password is printed at the end of the start and saved", {
      file,
    });
  }
  return true;
}

/**
 * The lines to show the operator about the initial admin, or none: the login itself when it was created by
 * this start, a reminder of where it is while the generated password still works, nothing once the admin
 * changed it (the stale file is removed then) or when the password came from the configuration.
 */
export async function initialAdminNotice(
  ctx: Pick<ServerContext, "config" | "db">,
  options: { created: boolean; url: string },
): Promise<string[]> {
  const file = join(ctx.config.server.dataDir, INITIAL_PASSWORD_FILE);
  const password = (await Deno.readTextFile(file).catch(() => "")).trim();
  if (!password) return [];
  const [admin] = await ctx.db.query<{ password_hash: string }>(
    "SELECT password_hash FROM users WHERE username = $1 AND enabled",
    [INITIAL_ADMIN],
  );
  if (!admin || !await verifyPassword(password, admin.password_hash)) {
    await Deno.remove(file).catch(() => {});
    return [];
  }
  if (options.created) {
    return [
      `svc: initial admin login: ${INITIAL_ADMIN} / ${password}`,
      `Open ${options.url} and change this password after the first login.`,
      `It is also saved in ${file} until then.`,
    ];
  }
  return [
    `svc: the initial admin password was shown at the first start and is still in ${file}`,
    `Log in at ${options.url} as ${INITIAL_ADMIN} and change it; this reminder stops then.`,
  ];
}

/** Frames lines in a box so they stand out at the end of a start log. */
export function boxed(lines: readonly string[]): string {
  const width = Math.max(...lines.map((l) => l.length));
  const bar = "─".repeat(width + 2);
  return [`┌${bar}┐`, ...lines.map((l) => `│ ${l.padEnd(width)} │`), `└${bar}┘`].join("\n");
}
