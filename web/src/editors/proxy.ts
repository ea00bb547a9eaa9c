/**
 * Editor of the Proxy policy type: the generated form with labels and help for a manual proxy (hosts and ports,
 * the hosts reached directly) or a PAC URL (the server checks the same rules in shared/policy_types/proxy.ts).
 */
import type { EditorSpec } from "./spec.ts";

const PROXY = "Proxy";

/** The Proxy editor. */
export const proxyEditor: EditorSpec = {
  hints: {
    catalogue: {
      groups: [PROXY],
      fieldInfo: {
        manual: {
          group: PROXY,
          label: "Manual proxy",
          description: "Proxy servers by host and port. Set this or a PAC URL, not both.",
        },
        "manual.http": { label: "HTTP proxy", description: "Used for http:// addresses; required." },
        "manual.http.host": {
          label: "Host",
          description: "Host name or IP address, e.g. proxy.example.com.",
        },
        "manual.http.port": { label: "Port", description: "TCP port, e.g. 3128.", min: 1, max: 65535 },
        "manual.https": {
          label: "HTTPS proxy",
          description: "Used for https:// addresses; unset uses the HTTP proxy.",
        },
        "manual.https.host": { label: "Host", description: "Host name or IP address." },
        "manual.https.port": { label: "Port", description: "TCP port, e.g. 3128.", min: 1, max: 65535 },
        pacUrl: {
          group: PROXY,
          label: "PAC URL",
          description:
            "http(s) URL of a proxy auto-configuration file. Reaches GNOME, KDE and the browsers; " +
            "the environment, apt and dnf cannot read PAC files.",
          format: "url",
        },
        noProxy: {
          group: PROXY,
          label: "Reached directly",
          description: "With a manual proxy: host names, domains (.example.com), addresses and networks " +
            "(10.0.0.0/8). localhost, 127.0.0.0/8 and ::1 always are. No credentials anywhere: every file " +
            "that carries the proxy is readable by all users.",
        },
      },
    },
  },
};
