/**
 * The Certificates type's trust anchors on the agent: which certificates the policies install and under which
 * names (one merge, used by the Certificates enforcer and by the browsers that carry the certificates in their
 * policy files), where the node's system trust store keeps them, and the keys the browsers get.
 *
 * Merge (trust adds up): every certificate of every policy is installed. Entries are taken in the engine's
 * order (priority descending, then policy id): a name belongs to the first entry that uses it (a later entry
 * with another certificate under that name is overridden); a certificate given again under another name is
 * installed once, under its first name; an expired certificate is not installed (reported on its entry).
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
 * Browsers: Firefox trusts neither the system store nor `/etc/pki/nssdb` on Debian (its built-in roots only;
 * `ImportEnterpriseRoots` works on Windows and macOS), so its policies file lists the anchor files in
 * `Certificates.Install`. Chromium on Debian does not read `/etc/pki/nssdb` either (its NSS is built without
 * nss-sysinit; only the user's `~/.pki/nssdb`), but honours the `CACertificates` policy (base64 DER), so the
 * Chrome family's policy file lists them there. Both facts were checked against Debian 12's firefox-esr and
 * chromium with a test CA (see docs/admin/policy-types/certificates.md). On Fedora/RHEL the system anchors
 * also reach NSS through p11-kit, and the browser keys are harmless repeats.
 *
 * @module
 */

import type { CertificatesPolicy } from "../../shared/gen/svc/policy/v1/certificates_pb.ts";
import {
  certificatesType,
  checkCertificates,
  expiryProblem,
  trustAnchor,
} from "../../shared/policy_types/certificates.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import { IssueList } from "../../shared/policy_types/sanitizers.ts";
import { type CertificateInfo, certificatePem, derBase64, pemBlocks } from "../../shared/x509.ts";
import { parsePolicyContent } from "../sync/content.ts";
import type { KeyedValues } from "../sync/key_merge.ts";
import type { CachedPolicy, EnforcerIO, ItemResult } from "../sync/types.ts";
import type { BrowserCompanion } from "./browser_enforcer.ts";
import { overriddenBy, Winners } from "./desktop_enforcer.ts";

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

/** One certificate entry of one policy, read. */
export interface Anchor {
  policy: CachedPolicy;
  name: string;
  info: CertificateInfo;
  /** Base64 DER: the certificate's identity. */
  id: string;
  /** Canonical PEM, as written. */
  pem: string;
}

/** What the policies install. */
export interface AnchorPlan {
  /** Entries by name; the winners are installed. */
  byName: Winners<Anchor>;
  /** The first (installed) entry of each certificate, by {@linkcode Anchor.id}. */
  byCertificate: Map<string, Anchor>;
  /** Items decided while planning (expired), per policy id. */
  settled: Map<string, ItemResult[]>;
}

/**
 * Parses and checks a cached policy with the shared rules, except the date (an expired certificate is reported on
 * its entry).
 *
 * @throws {PolicyContentError} naming the problems.
 */
export function certificatesContent(policy: CachedPolicy): CertificatesPolicy {
  const message = parsePolicyContent(policy, certificatesType);
  const issues = new IssueList();
  checkCertificates(message, issues, null);
  if (issues.issues.length) {
    throw new PolicyContentError(
      issues.issues.slice(0, 5).map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join("; "),
    );
  }
  return message;
}

/** Merges the entries of valid policies (in the engine's order); see the module documentation. */
export function planAnchors(
  valid: readonly { policy: CachedPolicy; message: CertificatesPolicy }[],
  now: Date,
): AnchorPlan {
  const plan: AnchorPlan = { byName: new Winners(), byCertificate: new Map(), settled: new Map() };
  for (const { policy, message } of valid) {
    const items: ItemResult[] = [];
    for (const entry of message.certificates) {
      const info = trustAnchor(entry.pem) as CertificateInfo; // checked by certificatesContent
      const expired = expiryProblem(info, now);
      if (expired) {
        items.push({
          schemaId: "certificates",
          key: entry.name,
          status: "NON_COMPLIANT",
          message: `${expired}; not installed`,
        });
        continue;
      }
      const id = derBase64(info.der);
      const anchor: Anchor = { policy, name: entry.name, info, id, pem: certificatePem(info.der) };
      if (plan.byCertificate.has(id)) {
        plan.byName.add(`\u0000${entry.name}\u0000${policy.id}`, anchor); // listed under its policy, installed once
        continue;
      }
      if (plan.byName.add(entry.name, anchor)) plan.byCertificate.set(id, anchor);
    }
    plan.settled.set(policy.id, items);
  }
  return plan;
}

/** Whether `anchor` is the one installed under its name. */
export function installed(plan: AnchorPlan, anchor: Anchor): boolean {
  return plan.byName.winner(anchor.name) === anchor;
}

/**
 * How `anchor` stands before any store is read: undefined when it is installed itself or as the same certificate
 * under another entry (then `as` is that entry), else the INAPPLICABLE reason.
 */
export function anchorStanding(plan: AnchorPlan, anchor: Anchor): { as: Anchor } | { overridden: string } {
  const first = plan.byCertificate.get(anchor.id);
  if (first) return { as: first };
  return {
    overridden: overriddenBy(
      plan.byName.winner(anchor.name)!.policy,
      `another certificate named ${anchor.name}`,
    ),
  };
}

/** The valid policies among `policies`, quietly (their own enforcer reports the others). */
function validPolicies(
  policies: readonly CachedPolicy[],
): { policy: CachedPolicy; message: CertificatesPolicy }[] {
  const out: { policy: CachedPolicy; message: CertificatesPolicy }[] = [];
  for (const policy of policies) {
    try {
      out.push({ policy, message: certificatesContent(policy) });
    } catch (err) {
      if (!(err instanceof PolicyContentError)) throw err;
    }
  }
  return out;
}

/** The installed anchors of each policy, as the browsers get them. */
function perPolicy(policies: readonly CachedPolicy[]): Map<CachedPolicy, Anchor[]> {
  const plan = planAnchors(validPolicies(policies), new Date());
  const out = new Map<CachedPolicy, Anchor[]>();
  for (const anchor of plan.byCertificate.values()) {
    out.set(anchor.policy, [...(out.get(anchor.policy) ?? []), anchor]);
  }
  return out;
}

/** The Certificates type's key for Firefox: `Certificates.Install` lists the anchor files of the system store. */
export const firefoxCertificates: BrowserCompanion = {
  type: certificatesType.wireName,
  async keyed(policies, io): Promise<KeyedValues[]> {
    const store = await detectTrustStore(io);
    if (!store) return [];
    return [...perPolicy(policies)].map(([policy, anchors]) => ({
      policy,
      values: { Certificates: { Install: anchors.map((a) => anchorPath(store, a.name)) } },
    }));
  },
};

/** The Certificates type's key for the Chromium family: `CACertificates`, base64 DER, added up across policies. */
export const chromiumCertificates: BrowserCompanion = {
  type: certificatesType.wireName,
  rules: { CACertificates: "union" },
  keyed(policies): Promise<KeyedValues[]> {
    return Promise.resolve(
      [...perPolicy(policies)].map(([policy, anchors]) => ({
        policy,
        values: { CACertificates: anchors.map((a) => a.id) },
      })),
    );
  },
};
