/**
 * Maintainer scripts of both packages as POSIX shell fragments, shared by the deb, apk and Arch writers
 * (the agent's rpm scriptlets are Lua, in `rpm.ts`, so the agent rpm needs no shell to install).
 *
 * Rules (spec "Agent interface"): installing only reloads systemd, never starts anything; removing stops
 * and disables the unit; purging (deb) removes configuration and data, a plain removal keeps them.
 * Every systemd call is skipped when systemd is not the running init (containers, image builds, chroots).
 *
 * @module
 */
import type { App } from "./targets.ts";

const SYSTEMD_RUNNING = "[ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1";

/** `systemctl daemon-reload` when systemd runs. */
export const RELOAD = `if ${SYSTEMD_RUNNING}; then systemctl daemon-reload || true; fi`;

/** Stops (when systemd runs) and disables (always possible offline) the unit of `app`. */
export function stopAndDisable(app: App): string {
  return [
    `if ${SYSTEMD_RUNNING}; then systemctl stop ${app}.service || true; fi`,
    `if command -v systemctl >/dev/null 2>&1; then systemctl disable ${app}.service >/dev/null 2>&1 || true; fi`,
  ].join("\n");
}

/**
 * Creates the unprivileged `svc` system user and group of the server when absent: shadow's
 * groupadd/useradd where present (Debian, Fedora, openSUSE), busybox's addgroup/adduser otherwise.
 */
export const CREATE_SVC_USER =
  `if ! getent group svc >/dev/null 2>&1 && ! grep -q '^svc:' /etc/group 2>/dev/null; then
  if command -v groupadd >/dev/null 2>&1; then groupadd --system svc; else addgroup -S svc; fi
fi
if ! id svc >/dev/null 2>&1; then
  if command -v useradd >/dev/null 2>&1; then
    useradd --system --gid svc --home-dir /var/lib/svc --no-create-home --shell /usr/sbin/nologin \\
      --comment "svc server" svc
  else
    adduser -S -D -H -G svc -h /var/lib/svc -s /sbin/nologin -g "svc server" svc
  fi
fi`;

/**
 * Removing the agent takes back what svc did on the node (originals restored, svc's Flatpaks removed), after
 * the service stopped: a node leaving management is left as it was, not frozen with unmanaged policies. A
 * failure is reported and does not block the removal.
 */
export const AGENT_RELEASE = `if command -v svc-agent >/dev/null 2>&1; then
  svc-agent release || echo "svc-agent: some of svc's changes could not be taken back; see above" >&2
fi`;

/**
 * An upgraded agent restarts once, into the new version: it enforces its stored policy set at once, so no
 * restriction is lifted between the two processes.
 */
export const AGENT_RESTART =
  `if ${SYSTEMD_RUNNING}; then systemctl try-restart svc-agent.service || true; fi`;

/** Directories and files purge removes, per package. */
export const PURGE: Record<App, string> = {
  "svc-agent": `rm -f /etc/svc/agent.yaml /etc/svc/agent.yaml.dpkg-old /etc/svc/agent.yaml.dpkg-dist
rm -rf /var/lib/svc-agent
rmdir /etc/svc 2>/dev/null || true`,
  "svc-server": `rm -f /etc/svc/server.yaml /etc/svc/server.yaml.dpkg-old /etc/svc/server.yaml.dpkg-dist
rm -rf /var/lib/svc
rmdir /etc/svc 2>/dev/null || true`,
};

/** First-install setup of the server after its files are unpacked (user exists by then). */
export const SERVER_SETUP = `chgrp svc /etc/svc/server.yaml && chmod 0640 /etc/svc/server.yaml
if [ ! -d /var/lib/svc ]; then mkdir -p /var/lib/svc && chown svc:svc /var/lib/svc && chmod 0700 /var/lib/svc; fi`;

/** The Debian maintainer scripts of `app`. */
export function debScripts(app: App): Record<string, string> {
  const head = "#!/bin/sh\nset -e\n";
  const postinst = app === "svc-server"
    ? `case "$1" in
configure)
${indent(CREATE_SVC_USER)}
  if [ -z "$2" ]; then
${indent(SERVER_SETUP, 4)}
  fi
  ${RELOAD}
  ;;
esac`
    : `case "$1" in
configure)
  ${RELOAD}
  if [ -n "$2" ]; then
${indent(AGENT_RESTART, 4)}
  fi
  ;;
esac`;
  return {
    postinst: `${head}${postinst}\nexit 0\n`,
    prerm: `${head}case "$1" in\nremove)\n${indent(stopAndDisable(app))}\n${
      app === "svc-agent" ? `${indent(AGENT_RELEASE)}\n` : ""
    }  ;;\nesac\nexit 0\n`,
    postrm: `${head}case "$1" in
remove)
  ${RELOAD}
  ;;
purge)
${indent(PURGE[app])}
  ${RELOAD}
  ;;
esac
exit 0
`,
  };
}

/** Alpine scripts (`.post-install`, `.pre-deinstall`, `.post-deinstall`) of the agent. */
export function apkScripts(): Record<string, string> {
  const head = "#!/bin/sh\n";
  return {
    ".post-install": `${head}${RELOAD}\nexit 0\n`,
    ".pre-deinstall": `${head}${stopAndDisable("svc-agent")}\n${AGENT_RELEASE}\nexit 0\n`,
    ".post-deinstall": `${head}${RELOAD}\nexit 0\n`,
  };
}

/** Arch's `.INSTALL` (pacman calls these functions). */
export function pacmanInstall(): string {
  return `post_install() {
${indent(RELOAD)}
}

post_upgrade() {
${indent(RELOAD)}
${indent(AGENT_RESTART)}
}

pre_remove() {
${indent(stopAndDisable("svc-agent"))}
${indent(AGENT_RELEASE)}
}

post_remove() {
${indent(RELOAD)}
}
`;
}

function indent(text: string, n = 2): string {
  return text.split("\n").map((l) => (l ? " ".repeat(n) + l : l)).join("\n");
}
