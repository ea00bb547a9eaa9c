/**
 * Certificates enforcer: CA certificates the node trusts, in its system trust store and in its browsers.
 *
 * 1. Every policy is parsed and checked again with the shared rules (server data is untrusted); the date is left
 *    to each entry: an expired certificate is NON_COMPLIANT on its entry and not installed, the others are.
 * 2. Entries merge as `certificates/anchors.ts` describes (every certificate installed once; a name to the first
 *    policy in priority order).
 * 3. Each installed certificate becomes `svc-policy-<name>.crt` (PEM, re-encoded from the checked DER, so
 *    nothing but the certificate reaches the file) in the anchors directory of the node's system store
 *    (`certificates/trust_store.ts`); the store's own tool rebuilds it (`update-ca-certificates --fresh`,
 *    `update-ca-trust extract`) as the skeleton's transaction: when the tool fails, the previous files are put
 *    back and it runs again.
 *    Removing a policy removes exactly svc's files and rebuilds the store, so nothing else changes.
 * 4. The browsers get the certificates through their own policy files, written by the Firefox and Chrome
 *    enforcers (which run first, see `Enforcer.companions`): Firefox's `Certificates.Install` lists the anchor
 *    files, the Chromium family's `CACertificates` the certificates.
 * 5. Read-back per entry and target: the store's bundle (what OpenSSL, GnuTLS and p11-kit users read) holds the
 *    certificate; each installed Firefox's policies file lists its file; each installed Chromium-family browser's
 *    policy file lists it (and the browser knows the policy).
 *
 * A node without a known system store keeps nothing in it: the store item is INAPPLICABLE, and so is Firefox's
 * (it installs from the store's files); Chromium still gets the certificates.
 *
 * @module
 */

import type { CertificatesPolicy } from "../../shared/gen/svc/policy/v1/certificates_pb.ts";
import { certificatesType, isoDay } from "../../shared/policy_types/certificates.ts";
import type { ComplianceStatusName, ItemResult, PolicyResult } from "../sync/types.ts";
import { type BrowserView, browserViews } from "./browser_views.ts";
import { CHROME_BROWSERS, chromeFamily } from "./chrome.ts";
import {
  type Checked,
  desktopEnforcer,
  type DesktopPlan,
  summarize,
  type SummaryWords,
} from "./desktop_enforcer.ts";
import { FIREFOX_INSTALL_PATHS, firefoxFamily } from "./firefox.ts";
import {
  type Anchor,
  type AnchorPlan,
  anchorStanding,
  certificatesContent,
  planAnchors,
} from "./certificates/anchors.ts";
import {
  ANCHOR_PREFIX,
  anchorPath,
  bundleCertificates,
  detectTrustStore,
  NO_TRUST_STORE,
  rebuild,
  TRUST_STORES,
  type TrustStore,
} from "./certificates/trust_store.ts";

/** What the type lands: the anchor files of the node's store. */
interface CertificatesPlan extends DesktopPlan {
  anchors: AnchorPlan;
  store: TrustStore | undefined;
}

/** What the node's programs see. */
interface Seen {
  /** Certificates in the store's bundle, or why it could not be read. */
  bundle: Set<string> | string;
  firefox: BrowserView[];
  chromium: BrowserView[];
}

const WORDS: SummaryWords = {
  inEffect: (ok, skipped) =>
    `trusted where it applies (${ok} check(s))` + (skipped ? `; ${skipped} not applicable` : ""),
  none: "certificate target",
  noun: "certificate check(s)",
  label: (i) => `${i.key} in ${i.schemaId}`,
};

function item(anchor: Anchor, schemaId: string, status: ComplianceStatusName, message: string): ItemResult {
  return { schemaId, key: anchor.name, status, message };
}

/** The items of one entry: the store, then every Firefox and Chromium-family browser. */
function anchorItems(
  anchor: Anchor,
  plan: CertificatesPlan,
  seen: Seen,
  failed: Map<string, string>,
): ItemResult[] {
  const standing = anchorStanding(plan.anchors, anchor);
  if ("overridden" in standing) return [item(anchor, "certificates", "INAPPLICABLE", standing.overridden)];
  const installedAs = standing.as;
  const via = installedAs === anchor
    ? ""
    : ` (installed as ${installedAs.name} by policy "${installedAs.policy.name}")`;
  const expires = `expires ${isoDay(anchor.info.notAfter)}`;
  const items: ItemResult[] = [];
  const { store } = plan;
  if (!store) {
    items.push(item(anchor, "system trust store", "INAPPLICABLE", NO_TRUST_STORE));
  } else {
    const error = failed.get(anchorPath(store, installedAs.name));
    if (error) items.push(item(anchor, store.bundle, "ERROR", error));
    else if (typeof seen.bundle === "string") items.push(item(anchor, store.bundle, "ERROR", seen.bundle));
    else if (seen.bundle.has(anchor.id)) {
      items.push(item(anchor, store.bundle, "COMPLIANT", `trusted by the system (${expires})${via}`));
    } else {
      items.push(
        item(anchor, store.bundle, "NON_COMPLIANT", `${store.command} left it out of the bundle${via}`),
      );
    }
  }
  for (const view of seen.firefox) {
    const where = view.target.path;
    if (!store) {
      items.push(
        item(
          anchor,
          where,
          "INAPPLICABLE",
          `${view.target.product} installs certificates from the system store's files, which this node lacks`,
        ),
      );
      continue;
    }
    const path = anchorPath(store, installedAs.name);
    const install = typeof view.keys === "string"
      ? undefined
      : (view.keys.Certificates as { Install?: unknown })?.Install;
    if (typeof view.keys === "string") items.push(item(anchor, where, "ERROR", view.keys));
    else if (Array.isArray(install) && install.includes(path)) {
      items.push(item(anchor, where, "COMPLIANT", `${view.target.product} installs ${path}${via}`));
    } else {
      items.push(item(anchor, where, "NON_COMPLIANT", `${path} is not in Certificates.Install`));
    }
  }
  for (const view of seen.chromium) {
    const where = view.target.path;
    const list = typeof view.keys === "string" ? undefined : view.keys.CACertificates;
    if (typeof view.keys === "string") items.push(item(anchor, where, "ERROR", view.keys));
    else if (!Array.isArray(list) || !list.includes(anchor.id)) {
      items.push(item(anchor, where, "NON_COMPLIANT", "not in the CACertificates policy"));
    } else if (view.ignored.has("CACertificates")) {
      items.push(item(anchor, where, "NON_COMPLIANT", view.ignored.get("CACertificates")!));
    } else {
      items.push(item(anchor, where, "COMPLIANT", `${view.target.product} trusts it (CACertificates)${via}`));
    }
  }
  return items;
}

function report(
  { policy }: Checked<CertificatesPolicy>,
  plan: CertificatesPlan,
  seen: Seen,
  failed: Map<string, string>,
): Omit<PolicyResult, "policyId"> {
  const items = [...(plan.anchors.settled.get(policy.id) ?? [])];
  for (const anchor of plan.anchors.byName.of(policy.id)) {
    items.push(...anchorItems(anchor, plan, seen, failed));
  }
  return { ...summarize(items, WORDS), items };
}

/** The Certificates enforcer; see the module documentation. */
export const certificatesEnforcer = desktopEnforcer<CertificatesPolicy, CertificatesPlan, Seen>({
  type: certificatesType.wireName,
  // Browsers read their policies at start.
  notifiesUsers: true,
  check: certificatesContent,
  needs: [],
  // A store tool or a browser installed later changes what applies.
  reads: [
    ...TRUST_STORES.flatMap((s) => [`/usr/sbin/${s.command}`, `/usr/bin/${s.command}`, s.marker]),
    ...FIREFOX_INSTALL_PATHS,
    ...CHROME_BROWSERS.flatMap((b) => b.installPaths),
  ],
  isOwnContent: (_text, path) => path.slice(path.lastIndexOf("/") + 1).startsWith(ANCHOR_PREFIX),
  async plan(valid, io) {
    const anchors = planAnchors(valid, new Date());
    const store = await detectTrustStore(io);
    const files = new Map<string, string>();
    if (store) {
      for (const anchor of anchors.byCertificate.values()) {
        files.set(anchorPath(store, anchor.name), anchor.pem);
      }
    }
    return { files, settled: anchors.settled, anchors, store };
  },
  transaction: {
    what: "the trust store's files",
    async activate(io, plan, { changed }) {
      const store = plan.store ?? await detectTrustStore(io);
      if (!store) return undefined;
      let dirty = changed.length > 0;
      if (!dirty && plan.anchors.byCertificate.size > 0) {
        const bundle = bundleCertificates(await io.fs.readTextFile(store.bundle) ?? "");
        dirty = [...plan.anchors.byCertificate.keys()].some((id) => !bundle.has(id));
      }
      return dirty ? await rebuild(io, store) : undefined;
    },
    async reactivate(io, plan) {
      const store = plan.store ?? await detectTrustStore(io);
      if (store) await rebuild(io, store);
    },
    note: " (previous certificate files restored)",
    keepsChanges: true,
  },
  async readBack(io, plan) {
    const bundleText = plan.store
      ? await io.fs.readTextFile(plan.store.bundle).catch((err) => err as Error)
      : "";
    return {
      bundle: bundleText instanceof Error
        ? `cannot read ${plan.store!.bundle}: ${bundleText.message}`
        : bundleText === undefined
        ? `${plan.store!.bundle} is missing`
        : bundleCertificates(bundleText),
      firefox: await browserViews(io, firefoxFamily, ["Certificates"]),
      chromium: await browserViews(io, chromeFamily, ["CACertificates"]),
    };
  },
  report: (checked, { plan, state, landed }) => report(checked, plan, state, landed.failed),
});
