/**
 * The node's system trust store: which layout the node has, where svc's anchor files go in it, the tool that
 * rebuilds it and the bundle its programs read.
 *
 * System store, chosen by what the node has (checked in this order):
 *
 * | Layout | Found by | Anchors | Rebuilt with | Programs read |
 * |---|---|---|---|---|
 * | Debian, Ubuntu | `update-ca-certificates` and `/etc/ca-certificates.conf` | `/usr/local/share/ca-certificates` | `update-ca-certificates --fresh` | `/etc/ssl/certs/ca-certificates.crt` (and the hashed links beside it) |
 * | Fedora, RHEL | `update-ca-trust` and `/etc/pki/ca-trust/source/anchors` | that directory | `update-ca-trust extract` | `/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem` |
 *
 * Files are `svc-policy-<name>.crt` (the prefix keeps them apart from the `svc-ca.crt` the deployment script
 * installs). `--fresh` makes Debian's tool drop the links of removed files too, not only their bundle entries.
 *
 * @module
 */

import { pemBlocks } from "../../../shared/x509.ts";
import type { EnforcerIO } from "../../sync/types.ts";

/** Prefix of svc's anchor files. */
export const ANCHOR_PREFIX = "svc-policy-";

/** A system trust store layout; see the module documentation. */
export interface TrustStore {
  /** For messages, e.g. `Debian`. */
  name: string;
  /** The command that rebuilds the store. */
  command: string;
  /** A node path that exists only with this layout. */
  marker: string;
  /** Directory of the administrator's anchors (node path). */
  anchorsDir: string;
  /** The bundle the node's programs read (node path). */
  bundle: string;
  /** The command's arguments for the node under `io`'s root. */
  args(io: EnforcerIO): Promise<string[]>;
}

/** Debian and Ubuntu (ca-certificates). */
export const DEBIAN_STORE: TrustStore = {
  name: "Debian",
  command: "update-ca-certificates",
  marker: "/etc/ca-certificates.conf",
  anchorsDir: "/usr/local/share/ca-certificates",
  bundle: "/etc/ssl/certs/ca-certificates.crt",
  // Every path given explicitly, resolved under the root: the same as the defaults on a node, a test root's own.
  args: async (io) => [
    "--fresh",
    ...(await Promise.all([
      ["--certsconf", "/etc/ca-certificates.conf"],
      ["--certsdir", "/usr/share/ca-certificates"],
      ["--localcertsdir", "/usr/local/share/ca-certificates"],
      ["--etccertsdir", "/etc/ssl/certs"],
      ["--hooksdir", "/etc/ca-certificates/update.d"],
    ].map(async ([option, path]) => [option, await io.fs.resolve(path)]))).flat(),
  ],
};

/** Fedora, RHEL and their relatives (ca-certificates with p11-kit). */
export const FEDORA_STORE: TrustStore = {
  name: "Fedora/RHEL",
  command: "update-ca-trust",
  marker: "/etc/pki/ca-trust/source/anchors",
  anchorsDir: "/etc/pki/ca-trust/source/anchors",
  bundle: "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
  args: () => Promise.resolve(["extract"]),
};

/** The layouts, in the order they are looked for. */
export const TRUST_STORES: readonly TrustStore[] = [DEBIAN_STORE, FEDORA_STORE];

/** Why no layout applies, naming what was looked for. */
export const NO_TRUST_STORE = `no system trust store this agent knows: looked for ${
  TRUST_STORES.map((s) => `${s.command} with ${s.marker}`).join(", and ")
}`;

/** The node's system trust store layout, if it has one. */
export async function detectTrustStore(io: EnforcerIO): Promise<TrustStore | undefined> {
  for (const store of TRUST_STORES) {
    if (await io.runner.which(store.command) && await io.fs.exists(store.marker)) return store;
  }
  return undefined;
}

/** Node path of an anchor file. */
export function anchorPath(store: TrustStore, name: string): string {
  return `${store.anchorsDir}/${ANCHOR_PREFIX}${name}.crt`;
}

/** Base64 of the DER of every certificate in PEM text (a bundle), for membership tests. */
export function bundleCertificates(text: string): Set<string> {
  return new Set(
    pemBlocks(text).blocks.filter((b) => b.label === "CERTIFICATE").map((b) => b.body.replace(/\s+/g, "")),
  );
}

function toolMessage(result: { stderr: string; stdout: string; code: number }): string {
  const text = `${result.stderr}\n${result.stdout}`.trim().replace(/\s+/g, " ");
  return text ? text.slice(-1000) : `exit code ${result.code}`;
}

/** Rebuilds the store with its own tool; the tool's message when it fails. */
export async function rebuild(io: EnforcerIO, store: TrustStore): Promise<string | undefined> {
  const result = await io.runner.run(store.command, await store.args(io), { timeoutMs: 300_000 });
  return result.success ? undefined : `${store.command} failed: ${toolMessage(result)}`;
}
