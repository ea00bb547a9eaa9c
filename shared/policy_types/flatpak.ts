/**
 * Flatpak: system-wide remotes and applications, merged by priority. Remote names become file names and
 * `flatpak` arguments, URLs are fetched by the node (https, or http to the node's own loopback), keys and
 * filters are written to files.
 */
import {
  FlatpakAppState,
  FlatpakAppStateSchema,
  type FlatpakPolicy,
  FlatpakPolicySchema,
} from "../gen/svc/policy/v1/flatpak_pb.ts";
import { defineType, enumNumbers } from "./define.ts";
import {
  base64Text,
  flatpakAppId,
  identifier,
  matches,
  maxLength,
  multiLineText,
  required,
  singleLine,
  urlWithScheme,
} from "./sanitizers.ts";

const FILTER_LINE = /^\s*(#.*|(allow|deny)\s+[A-Za-z0-9_.*/-]+\s*)?$/;

function filterText(value: string): string | undefined {
  const bad = multiLineText(value);
  if (bad) return bad;
  const line = value.split("\n").findIndex((l) => !FILTER_LINE.test(l));
  return line < 0
    ? undefined
    : `line ${line + 1} must be "allow <ref pattern>", "deny <ref pattern>" or a # comment`;
}

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * https everywhere; plain http only for a mirror on the node itself (loopback), which never crosses a
 * network. Signatures are required either way.
 */
function remoteTransport(value: string): string | undefined {
  const url = new URL(value);
  if (url.protocol === "https:" || LOOPBACK_HOSTS.has(url.hostname)) return undefined;
  return "must use https (plain http is accepted only for a mirror on the node itself, e.g. http://127.0.0.1)";
}

/** The Flatpak policy type. */
export const flatpakType = defineType<FlatpakPolicy>({
  wireName: "Flatpak",
  label: "Flatpak apps",
  description: "Flatpak remotes and the apps installed or removed.",
  schema: FlatpakPolicySchema,
  typedContentCase: "flatpakPolicy",
  merge: "priority_merge",
  names: "proto",
  check(message, issues) {
    if (
      message.remotes.length === 0 && message.apps.length === 0 && message.allowUserInstalls === undefined
    ) {
      issues.add("", "policy content needs at least one setting: add a remote or an application");
    }
    if (message.updateIntervalHours < 0 || message.updateIntervalHours > 24 * 365) {
      issues.add("update_interval_hours", "must be between 0 and 8760");
    }
    const remotes = new Map<string, number>();
    message.remotes.forEach((remote, i) => {
      const at = `remotes[${i}]`;
      if (issues.check(`${at}.name`, remote.name, required, identifier(64))) {
        const first = remotes.get(remote.name);
        if (first !== undefined) issues.add(`${at}.name`, `repeats remotes[${first}]`);
        else remotes.set(remote.name, i);
      }
      issues.check(`${at}.url`, remote.url, required, urlWithScheme(["https", "http"]), remoteTransport);
      issues.check(
        `${at}.gpg_key`,
        remote.gpgKey,
        (v) => v ? undefined : "is required: unsigned remotes are refused",
        base64Text,
      );
      issues.check(`${at}.title`, remote.title, singleLine, maxLength(256));
      issues.optional(
        `${at}.subset`,
        remote.subset,
        matches(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, "a subset name such as verified"),
      );
      issues.optional(`${at}.filter`, remote.filter, filterText);
    });
    const apps = new Map<string, number>();
    message.apps.forEach((app, i) => {
      const at = `apps[${i}]`;
      if (issues.check(`${at}.app_id`, app.appId, required, flatpakAppId)) {
        const first = apps.get(app.appId);
        if (first !== undefined) issues.add(`${at}.app_id`, `repeats apps[${first}]`);
        else apps.set(app.appId, i);
      }
      issues.enumValue(`${at}.state`, app.state, enumNumbers(FlatpakAppStateSchema), {
        hint: "choose a state: FLATPAK_APP_STATE_PRESENT, _LATEST or _ABSENT",
      });
      if (app.state !== FlatpakAppState.ABSENT) {
        issues.check(
          `${at}.remote`,
          app.remote,
          (v) => v ? undefined : "is required to install an application",
          identifier(64),
        );
      } else {
        issues.optional(`${at}.remote`, app.remote, identifier(64));
      }
      issues.optional(`${at}.branch`, app.branch, identifier(64));
      if (app.deleteData && app.state !== FlatpakAppState.ABSENT) {
        issues.add(`${at}.delete_data`, "only applies to applications with state FLATPAK_APP_STATE_ABSENT");
      }
    });
  },
});
