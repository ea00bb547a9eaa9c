/**
 * The MFA policy (Settings → Second factors, stored in `settings` under `auth.mfa_policy`): who must have a
 * second factor. Everyone who logs in with a password (`all`), or whoever holds one of the chosen
 * permissions through their roles (`permissions`); directory (LDAP) users only when `include_ldap`.
 * Service accounts act through API tokens and are never asked.
 *
 * A person the policy covers who has no factor yet may still log in, but every API call other than
 * enrolling, `/auth/me` and logging out is refused with 403 `mfa_enrolment_required` until they enrol; the
 * console shows the enrolment page.
 *
 * @module
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { factorsOf, hasSecondFactor } from "./mfa.ts";
import { effectivePermissionsSql } from "./rbac.ts";

/** Settings key. */
export const MFA_POLICY_KEY = "auth.mfa_policy";

/** The stored policy. */
export interface MfaPolicy {
  mode: "off" | "all" | "permissions";
  /** With `permissions`: holding any of these requires a factor. */
  permissions: string[];
  /** LDAP users are covered too. */
  include_ldap: boolean;
}

/** No requirement (the default). */
export const DEFAULT_MFA_POLICY: MfaPolicy = { mode: "off", permissions: [], include_ldap: false };

/** The current policy. */
export async function getMfaPolicy(q: Queryable): Promise<MfaPolicy> {
  const row = await queryOne<{ value: Partial<MfaPolicy> }>(q, "SELECT value FROM settings WHERE key = $1", [
    MFA_POLICY_KEY,
  ]);
  return { ...DEFAULT_MFA_POLICY, ...(row?.value ?? {}) };
}

/** Stores the policy. */
export async function setMfaPolicy(q: Queryable, policy: MfaPolicy, by: string): Promise<void> {
  await q.query(
    // `::text::jsonb`: postgres.js would otherwise store the JSON text as a jsonb *string* (PGlite parses it),
    // and the policy would read back as "off" on PostgreSQL only.
    `INSERT INTO settings (key, value, updated_by) VALUES ($1, $2::text::jsonb, $3)
     ON CONFLICT (key) DO UPDATE SET value = $2::text::jsonb, updated_by = $3, updated_at = now()`,
    [MFA_POLICY_KEY, JSON.stringify(policy), by],
  );
}

/** True when `policy` covers a user of `source` holding `permissions`. */
export function policyCovers(policy: MfaPolicy, source: string, permissions: ReadonlySet<string>): boolean {
  if (policy.mode === "off") return false;
  if (source === "service") return false;
  if (source === "ldap" && !policy.include_ldap) return false;
  if (source !== "local" && source !== "ldap") return false;
  if (policy.mode === "all") return true;
  return policy.permissions.some((p) => permissions.has(p));
}

/** True when the policy covers the user (whether or not they already have a factor). */
export async function mfaRequiredFor(q: Queryable, userId: string): Promise<boolean> {
  const policy = await getMfaPolicy(q);
  if (policy.mode === "off") return false;
  const row = await queryOne<{ source: string; permissions: string[] }>(
    q,
    `SELECT u.source, ${effectivePermissionsSql("u.id")} AS permissions FROM users u WHERE u.id = $1`,
    [userId],
  );
  return row !== undefined && policyCovers(policy, row.source, new Set(row.permissions));
}

/**
 * True when the caller must enrol before anything else: the policy covers them and they have no factor.
 * `permissions` and `source` are what the request's authentication already loaded.
 */
export async function mustEnrol(
  q: Queryable,
  user: { id: string; source: string; permissions: ReadonlySet<string> },
): Promise<boolean> {
  const policy = await getMfaPolicy(q);
  if (!policyCovers(policy, user.source, user.permissions)) return false;
  return !hasSecondFactor(await factorsOf(q, user.id));
}
