/**
 * Edge enforcer: the Chrome-family enforcer (chromium.ts) for Microsoft Edge, which reads
 * `/etc/opt/edge/policies/managed` on Linux (every channel; the Edge Flatpak reads the host's
 * directory too).
 *
 * @module
 */

import { edgeType } from "../../shared/policy_types/edge.ts";
import type { Enforcer } from "../sync/types.ts";
import { type ChromiumBrowser, chromiumEnforcer } from "./chromium.ts";

/** The browsers of the Edge type. */
export const EDGE_BROWSERS: readonly ChromiumBrowser[] = [
  {
    product: "Microsoft Edge",
    installPaths: ["/opt/microsoft/msedge", "/opt/microsoft/msedge-beta", "/opt/microsoft/msedge-dev"],
    managedDir: "/etc/opt/edge/policies/managed",
    binaries: [
      "/opt/microsoft/msedge/msedge",
      "/opt/microsoft/msedge-beta/msedge",
      "/opt/microsoft/msedge-dev/msedge",
    ],
    chromium: false,
  },
];

/** The Edge enforcer. */
export const edgeEnforcer: Enforcer = chromiumEnforcer(edgeType, "Microsoft Edge", EDGE_BROWSERS);
