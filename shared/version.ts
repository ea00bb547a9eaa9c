/** The one version string of svc-server and svc-agent; both are built from the same checkout. */
export const VERSION = "0.1.0";
