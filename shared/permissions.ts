/**
 * The permission catalogue: every `resource:action` pair the server checks. Shared so the web UI can name
 * permissions the same way the server does (the UI only hides controls; the server enforces).
 */

/** Resource → actions. Adding a pair here makes it exist everywhere (database catalogue, roles, UI). */
export const PERMISSION_CATALOGUE = {
  // edit_scripts: create and edit Scripts policies (their content runs as root on every node they reach).
  policy: ["view", "create", "edit", "release", "delete", "edit_scripts"],
  binding: ["view", "create", "edit", "delete"],
  node: ["view", "edit", "delete", "revoke"],
  node_group: ["view", "create", "edit", "delete"],
  user: ["view", "create", "edit", "delete"],
  user_group: ["view", "create", "edit", "delete"],
  role: ["view", "create", "edit", "delete"],
  compliance: ["view"],
  audit_log: ["view", "export"],
  settings: ["view", "edit"],
  disk_encryption: ["view", "reveal"],
  agent_repo: ["view"],
} as const;

/** A permission id such as `policy:view`. */
export type Permission = {
  [R in keyof typeof PERMISSION_CATALOGUE]: `${R}:${(typeof PERMISSION_CATALOGUE)[R][number]}`;
}[keyof typeof PERMISSION_CATALOGUE];

/** Every permission id, sorted. */
export const ALL_PERMISSIONS: readonly Permission[] = Object.entries(PERMISSION_CATALOGUE)
  .flatMap(([resource, actions]) => actions.map((a) => `${resource}:${a}` as Permission))
  .sort();

/** True when `value` names a permission in the catalogue. */
export function isPermission(value: string): value is Permission {
  return (ALL_PERMISSIONS as readonly string[]).includes(value);
}
