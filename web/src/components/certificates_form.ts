/**
 * `<svc-certificates-form>`, the Certificates policy editor's form (see `editors/certificates.ts`): one card per
 * CA certificate with its name and PEM text, and what the shared X.509 reader (`shared/x509.ts`, the same
 * rules the server and the agent apply) reads from it: subject, SHA-256 fingerprint and expiry, or what is wrong
 * with it. A certificate file (.pem, .crt, .cer or .der; PEM text or DER bytes) can be loaded into a new entry.
 */
import { html, nothing } from "lit";
import { trustAnchor } from "../../../shared/policy_types/certificates.ts";
import { type CertificateInfo, sha256Fingerprint } from "../../../shared/x509.ts";
import {
  type CertificateSummary,
  EXPIRING_DAYS,
  fileAsPem,
  nameFromFile,
  summarizeCertificate,
} from "../certificate_summary.ts";
import type { JsonObject } from "../content.ts";
import { valueOf } from "./ui.ts";
import { PolicyFormElement } from "./policy_form_element.ts";

class SvcCertificatesForm extends PolicyFormElement {
  /** Fingerprints by PEM text, filled in as WebCrypto computes them. */
  readonly #fingerprints = new Map<string, string>();

  #set(index: number, field: "name" | "pem", text: string): void {
    const entries = [...this.listOf("certificates")];
    entries[index] = { ...entries[index], [field]: text };
    this.emitList("certificates", entries);
  }

  async #load(event: Event): Promise<void> {
    const input = event.target as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    const pem = fileAsPem(new Uint8Array(await file.arrayBuffer()));
    input.value = "";
    this.emitList("certificates", [...this.listOf("certificates"), { name: nameFromFile(file.name), pem }]);
  }

  #summary(pem: string): CertificateSummary | string {
    const summary = summarizeCertificate(pem);
    if (typeof summary === "string") return summary;
    const known = this.#fingerprints.get(pem);
    if (known) return { ...summary, fingerprint: known };
    const info = trustAnchor(pem) as CertificateInfo;
    sha256Fingerprint(info.der).then((fp) => {
      this.#fingerprints.set(pem, fp);
      this.requestUpdate();
    }).catch(() => {});
    return summary;
  }

  #card(entry: JsonObject, index: number) {
    const pem = typeof entry.pem === "string" ? entry.pem : "";
    const summary = pem.trim() ? this.#summary(pem) : undefined;
    const expiring = typeof summary === "object" && summary.daysLeft <= EXPIRING_DAYS;
    const nameIssue = this.issueText(`certificates[${index}].name`);
    return html`
      <fieldset class="card cert-entry" data-index=${index}>
        <legend>Certificate ${index + 1}</legend>
        <sl-input size="small" label="Name" ?disabled=${this.readOnly}
          .value=${String(entry.name ?? "")}
          help-text=${nameIssue || "The node's file is svc-policy-<name>.crt."}
          class=${nameIssue ? "cert-name has-error" : "cert-name"}
          @sl-change=${(e: Event) => this.#set(index, "name", valueOf(e))}></sl-input>
        <sl-textarea class="cert-pem" size="small" rows="6" resize="auto" label="CA certificate (PEM)"
          ?disabled=${this.readOnly} .value=${pem}
          help-text=${this.issueText(`certificates[${index}].pem`) ||
            "From -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----."}
          @sl-change=${(e: Event) => this.#set(index, "pem", valueOf(e))}></sl-textarea>
        ${summary === undefined
          ? nothing
          : typeof summary === "string"
          ? html`<p class="cert-problem attention-danger" role="alert">${summary}</p>`
          : html`
            <dl class="cert-summary">
              <dt>Subject</dt>
              <dd class="cert-subject">${summary.subject}</dd>
              <dt>SHA-256 fingerprint</dt>
              <dd class="cert-fingerprint"><code>${summary.fingerprint ?? "…"}</code></dd>
              <dt>Expires</dt>
              <dd class=${expiring ? "cert-expiry cert-expiring" : "cert-expiry"}>
                ${summary.notAfter}${summary.expired
                  ? " (expired)"
                  : expiring
                  ? ` (in ${summary.daysLeft} day${summary.daysLeft === 1 ? "" : "s"})`
                  : ""}
              </dd>
            </dl>
          `}
        ${this.readOnly ? nothing : html`
          <sl-button size="small" class="cert-remove" @click=${() =>
            this.emitList("certificates", this.listOf("certificates").filter((_, i) => i !== index))}>
            Remove <span class="visually-hidden">certificate ${index + 1}</span>
          </sl-button>
        `}
      </fieldset>
    `;
  }

  override render() {
    const entries = this.listOf("certificates");
    return html`
      <p class="muted cert-rule">
        Every certificate of every Certificates policy that reaches a node is trusted there: in the system
        store, in Firefox and in Chromium. Only CA certificates are accepted (RSA of at least 2048 bits, or EC
        P-256 or P-384), never a private key.
      </p>
      ${entries.map((entry, i) => this.#card(entry, i))}
      ${this.readOnly ? nothing : html`
        <div class="cert-actions">
          <sl-button size="small" class="cert-add" @click=${() =>
            this.emitList("certificates", [...entries, { name: "", pem: "" }])}>Add a certificate</sl-button>
          <label class="cert-load">Load a certificate file
            <input type="file" accept=".pem,.crt,.cer,.der" @change=${(e: Event) => this.#load(e)}>
          </label>
        </div>
      `}
    `;
  }
}

customElements.define("svc-certificates-form", SvcCertificatesForm);
