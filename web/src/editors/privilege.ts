/**
 * Editor of the Privilege policy type: `<svc-privilege-form>` (`components/privilege_form.ts`), the form generated
 * from the content message with labels and help, and a preview of the sudoers lines and the polkit administrator
 * rule this policy alone would produce (the agent's own renderers). It states the merge rule: per user or group the
 * policy bound with the higher priority decides, deny beats allow at equal priority and across principals.
 */
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { PrivilegePolicySchema } from "../../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { administrators, mergePrivilege, renderSudoers } from "../../../shared/privilege_rules.ts";
import { renderPolkitAdminRule } from "../../../shared/polkit_js.ts";
import type { JsonObject } from "../content.ts";
import type { EditorSpec } from "./spec.ts";

const WHO = "Administrators";

/** The Privilege editor. */
export const privilegeEditor: EditorSpec = {
  formTag: "svc-privilege-form",
  hints: {
    catalogue: {
      groups: [WHO],
      fieldInfo: {
        entries: {
          group: WHO,
          label: "Users and groups",
          description:
            "Each entry allows or revokes one user or group as an administrator of the node: sudo " +
            "may run every command for them, and polkit accepts their password when it asks for an administrator.",
        },
        "entries[].name": { label: "Name", description: "Short identifier shown in compliance reports." },
        "entries[].user": {
          label: "User",
          description:
            "A local or directory user name. Set a user or a group, not both. root cannot be named.",
        },
        "entries[].group": { label: "Group", description: "A local or directory group name, e.g. helpdesk." },
        "entries[].effect": {
          label: "Effect",
          description:
            "Allow makes the user or group an administrator; deny revokes it, whatever else grants it.",
        },
        "entries[].sudoNopasswd": {
          label: "sudo without password",
          description: "Allowed principals only: sudo does not ask for their password.",
        },
        localSudoGroupNotAdmin: {
          group: WHO,
          label: "Local sudo group members are not administrators",
          description:
            "Revokes the groups the node's /etc/sudoers grants every command (sudo on Debian and " +
            "Ubuntu, wheel on Fedora). The server refuses a set that leaves a node group without any administrator " +
            "unless you give a reason.",
        },
      },
    },
  },
};

/** The merge rule, stated once for the editor (the admin guide says the same). */
export const PRIVILEGE_MERGE_RULE =
  "Per user or group, the policy bound with the higher priority decides; at equal priority deny beats allow. " +
  "A revoked group also revokes members allowed by name, and the server refuses a set that would leave a node " +
  "group without an administrator unless you give a reason.";

/** The sudoers text and polkit rule this content alone makes on a node whose sudo group is `sudo`. */
export function privilegePreview(
  value: JsonObject,
): { sudoers: string; polkit: string } | { problem: string } {
  try {
    const content = fromJson(PrivilegePolicySchema, value as JsonValue, { ignoreUnknownFields: true });
    if (content.entries.length === 0 && !content.localSudoGroupNotAdmin) {
      return { problem: "Add an entry to see what the node gets." };
    }
    const merge = mergePrivilege([{ id: "this", name: "this policy", priority: 0, content }]);
    const admins = administrators(merge, ["sudo"]).map((a) => `unix-${a.kind}:${a.name}`);
    return {
      sudoers: renderSudoers(merge, ["sudo"]),
      polkit: renderPolkitAdminRule(admins.length ? admins : ["unix-user:root"]),
    };
  } catch (err) {
    return { problem: `Complete the entries to see what the node gets (${(err as Error).message}).` };
  }
}
