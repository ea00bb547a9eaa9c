/**
 * Editor of the Privilege policy type: `<svc-privilege-form>` (`components/privilege_form.ts`), the form generated
 * from the content message with labels and help, and a preview of the sudoers lines and the polkit administrator
 * rule this policy alone would produce (the agent's own renderers). It states the merge rule: per user or group the
 * policy bound with the higher priority decides, deny beats allow at equal priority and across principals.
 */
import type { EditorSpec } from "./spec.ts";

const WHO = "Administrators";

/** The Privilege editor. */
export const privilegeEditor: EditorSpec = {
  type: "Privilege",
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
