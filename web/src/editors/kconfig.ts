/**
 * Editor of the Kconfig policy type: the form generated from its content message, with labels, help and the
 * usual KDE files, Kiosk actions and resources offered as choices, grouped as an administrator thinks of
 * them (settings, restrictions, URL rules, System Settings modules).
 */
import type { FieldInfo } from "../../../shared/policy_types/browser.ts";
import type { EditorSpec } from "./spec.ts";

const SETTINGS = "KDE settings";
const RESTRICTIONS = "Kiosk restrictions";
const URLS = "URL restrictions";
const MODULES = "System Settings modules";

const FILES = [
  ["kdeglobals", "kdeglobals: colours, fonts, icons, shortcuts, Kiosk"],
  ["kwinrc", "kwinrc: window manager"],
  ["plasmarc", "plasmarc: Plasma shell"],
  ["kscreenlockerrc", "kscreenlockerrc: screen locking"],
  ["plasma-org.kde.plasma.desktop-appletsrc", "plasma-org.kde.plasma.desktop-appletsrc: desktop and panels"],
  ["ksmserverrc", "ksmserverrc: session (logout, restore)"],
  ["kxkbrc", "kxkbrc: keyboard layouts"],
  ["kcminputrc", "kcminputrc: mouse, touchpad, cursor theme"],
  ["krunnerrc", "krunnerrc: KRunner"],
  ["baloofilerc", "baloofilerc: file indexing"],
  ["dolphinrc", "dolphinrc: Dolphin"],
  ["konsolerc", "konsolerc: Konsole"],
  ["powermanagementprofilesrc", "powermanagementprofilesrc: power management"],
].map(([value, label]) => ({ value, label }));

const FIELD_INFO: Record<string, FieldInfo> = {
  entries: {
    group: SETTINGS,
    label: "Settings",
    description:
      "KDE config keys written into the system configuration (/etc/xdg); mark a key immutable so " +
      "users cannot override it. Takes effect at the next login.",
  },
  "entries[].file": {
    label: "File",
    description: "KDE config file name (kdeglobals or a name ending in rc)",
    enum: FILES,
  },
  "entries[].group": { label: "Group", description: "Top-level group, e.g. Daemon or General" },
  "entries[].subgroups": {
    label: "Nested groups",
    description: "Groups below the top-level one, outermost first: Containments → 1 → Wallpaper",
  },
  "entries[].key": { label: "Key", description: "Key name, e.g. Timeout" },
  "entries[].value": { label: "Value", description: "Value as KDE writes it: true, 300, Breeze" },
  "entries[].immutable": { label: "Immutable", description: "Users cannot override this key ([$i])" },
  actionRestrictions: {
    group: RESTRICTIONS,
    label: "Actions",
    description: "[KDE Action Restrictions] in kdeglobals, always immutable; false forbids the action " +
      "(e.g. shell_access, run_command, action/logout, action/file_save)",
  },
  resourceRestrictions: {
    group: RESTRICTIONS,
    label: "Resources",
    description: "[KDE Resource Restrictions] in kdeglobals, always immutable; false forbids changing the " +
      "resource (wallpaper, icons, autostart, colors, cursors)",
  },
  urlRestrictions: {
    group: URLS,
    label: "URL rules",
    description:
      "[KDE URL Restrictions] in kdeglobals, always immutable; rules of all policies are numbered " +
      "together, higher-priority policies last (later rules win). Empty fields match anything.",
  },
  "urlRestrictions[].action": {
    label: "Action",
    description: "What the rule governs",
    enum: [
      { value: "KCONFIG_URL_ACTION_OPEN", label: "Open" },
      { value: "KCONFIG_URL_ACTION_LIST", label: "List" },
      { value: "KCONFIG_URL_ACTION_REDIRECT", label: "Redirect" },
    ],
  },
  "urlRestrictions[].allow": { label: "Allow", description: "On permits matching URLs, off forbids them" },
  kcmRestrictions: {
    group: MODULES,
    label: "Hidden modules",
    description: "System Settings modules to hide and disable (written to /etc/kde5rc and /etc/kde6rc), " +
      "e.g. kcm_kscreen",
  },
};

/** The Kconfig editor. */
export const kconfigEditor: EditorSpec = {
  type: "Kconfig",
  hints: { catalogue: { groups: [SETTINGS, RESTRICTIONS, URLS, MODULES], fieldInfo: FIELD_INFO } },
};
