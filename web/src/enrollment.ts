/** What an administrator runs on a new node to enroll it (spec: Agent interface, `--token-file`). */

/** Where the token file goes on the node; root-only, removed after enrollment. */
const TOKEN_FILE = "/etc/svc/enrollment-token";

/** The commands an administrator runs on a new node to enroll it with `token`. */
export function enrollmentCommands(token: string, server: { host: string; port: string }): string {
  const port = server.port || "443";
  return [
    `# On the new node, as root. /etc/svc/agent.yaml must have server.address: ${server.host}` +
    (port === "8443" ? "" : ` and server.enrollment_port: ${port}`),
    `install -m 0600 /dev/null ${TOKEN_FILE}`,
    `printf '%s' '${token}' > ${TOKEN_FILE}`,
    `svc-agent --token-file ${TOKEN_FILE}`,
    `rm -f ${TOKEN_FILE}`,
    "systemctl enable --now svc-agent",
  ].join("\n");
}
