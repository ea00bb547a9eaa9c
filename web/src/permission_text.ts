/**
 * Permissions as a person reads them. The server refuses with the permission's id ("permission policy:edit
 * is required for this action"), which is what scripts need; a person needs to know what it allows and
 * which role to ask for. The built-in roles' permission sets come from the server's own definition, so the
 * roles named here are the ones that grant it.
 */
import { isPermission, type Permission } from "../../shared/permissions.ts";
import { builtinRolePermissions } from "../../shared/builtin_roles.ts";

const RESOURCE_WORDS: Record<string, string> = {
  policy: "policies",
  binding: "policy bindings",
  node: "nodes",
  node_group: "node groups",
  user: "users",
  user_group: "user groups",
  role: "roles",
  compliance: "compliance results",
  audit_log: "the audit log",
  settings: "settings",
  disk_encryption: "disk-encryption recovery keys",
  agent_repo: "the agent repository",
};

/** Permissions whose words are not "<action> <resource>". */
const PERMISSION_WORDS: Record<string, string> = {
  "policy:edit_scripts": "create and edit Scripts policies",
};

/** `policy:edit` → "edit policies". */
export function permissionWords(permission: string): string {
  const [resource, action] = permission.split(":");
  return PERMISSION_WORDS[permission] ??
    `${action} ${RESOURCE_WORDS[resource] ?? resource.replaceAll("_", " ")}`;
}

/** The built-in roles that hold every one of `permissions`, the narrowest first. */
export function rolesGranting(permissions: readonly string[]): string[] {
  return [...builtinRolePermissions()]
    .filter(([, held]) => permissions.every((p) => (held as string[]).includes(p)))
    .sort((a, b) => a[1].length - b[1].length)
    .map(([name]) => name);
}

/** "a, b or c". */
function either(words: string[]): string {
  return words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`;
}

/** The sentence naming who may: "Ask an administrator for a role that grants it: Policy Editor, …". */
export function roleAdvice(permissions: readonly string[]): string {
  const roles = rolesGranting(permissions);
  return roles.length
    ? `Ask an administrator for a role that allows it: ${either(roles)} (or a custom role with ${
      permissions.length === 1 ? "that permission" : "those permissions"
    }).`
    : "Ask an administrator for a role that allows it.";
}

/**
 * A 403's message for a person: each permission id becomes its words in quotes, and a sentence names the
 * roles that would allow the action.
 */
export function forbiddenText(message: string): string {
  const found: Permission[] = [];
  const worded = message.replace(/\b[a-z_]+:[a-z_]+\b/g, (token) => {
    if (!isPermission(token)) return token;
    if (!found.includes(token)) found.push(token);
    return `“${permissionWords(token)}”`;
  });
  const sentence = worded.charAt(0).toUpperCase() + worded.slice(1);
  if (found.length === 0) return `Not allowed: ${sentence}`;
  return `Not allowed: ${sentence.replace(/\.?$/, ".")} ${roleAdvice(found)}`;
}
