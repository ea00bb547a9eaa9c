/**
 * How the console names each policy type to an admin: a label and one line saying what it manages, for the
 * type tiles of a new policy and the policy picker. A type the console does not describe (a newer server)
 * shows its wire name.
 */
import { listPolicyTypes } from "../../../shared/policy_types/mod.ts";

/** An admin's name for a policy type and what it manages. */
export interface PolicyTypeInfo {
  wireName: string;
  label: string;
  /** One line: what a policy of this type manages on a node. */
  description: string;
}

const INFO: Record<string, Omit<PolicyTypeInfo, "wireName">> = {
  Firefox: { label: "Firefox", description: "Browser settings, extensions and bookmarks for Firefox." },
  Thunderbird: { label: "Thunderbird", description: "Mail client settings and add-ons for Thunderbird." },
  Chrome: { label: "Chrome and Chromium", description: "Browser policies for Google Chrome and Chromium." },
  Edge: { label: "Microsoft Edge", description: "Browser policies for Microsoft Edge on Linux." },
  Dconf: { label: "GNOME settings", description: "Desktop settings (dconf keys), optionally locked." },
  Firewalld: { label: "Firewall", description: "firewalld zones: services, ports, targets and rules." },
  Polkit: { label: "Privileges", description: "Who may do what without a password (polkit rules)." },
  Flatpak: { label: "Flatpak apps", description: "Flatpak remotes and the apps installed or removed." },
  SessionAccess: { label: "Login hours", description: "Which users may log in, and when." },
  DiskEncryption: { label: "Disk encryption", description: "LUKS recovery keys escrowed to the server." },
  Kconfig: { label: "KDE settings", description: "Plasma and KDE application settings, optionally locked." },
  Privilege: {
    label: "Administrators",
    description: "Who administers the node: sudo rights and the administrators polkit accepts.",
  },
  Scripts: {
    label: "Scripts",
    description:
      "Startup, shutdown, login and logout scripts, signed by the server; needs its own permission.",
  },
};

/** The label and description of `wireName`; its wire name when the console does not describe it. */
export function policyTypeInfo(wireName: string): PolicyTypeInfo {
  const info = INFO[wireName];
  return { wireName, label: info?.label ?? wireName, description: info?.description ?? "" };
}

/** Wire names of the known types whose wire name or label contains `text` (case-insensitive). */
export function typesMatching(text: string): string[] {
  const q = text.trim().toLowerCase();
  if (!q) return [];
  return listPolicyTypes().map((t) => t.wireName).filter((t) =>
    t.toLowerCase().includes(q) || policyTypeInfo(t).label.toLowerCase().includes(q)
  );
}
