/**
 * `<svc-mfa-settings>`: the signed-in person's second factors. Set up an authenticator app (password first,
 * then a QR code of the `otpauth://` URI and a confirmation code), see the ten backup codes once, get new
 * ones, or remove the app. Every change asks for the password again, plus a code when a factor exists.
 *
 * `<svc-mfa-required-page>`: shown instead of the console while the MFA policy requires a factor the person
 * does not have yet.
 */
import { html, nothing, svg } from "lit";
import { LightElement, stateProperties } from "./light_element.ts";
import qrcode from "qrcode-generator";
import { type Answer, api, type StepUpProof } from "../api.ts";
import { session } from "../session.ts";
import { errorAlert, fieldError, notify, valueOf } from "./ui.ts";
import { registerKey, stepUpWithKey, webauthnAvailable } from "../webauthn.ts";

/** `GET /api/v1/auth/webauthn/credentials` items. */
type KeyInfo = Answer<"GET /api/v1/auth/webauthn/credentials">["items"][number];

/** `GET /api/v1/auth/mfa`. */
type MfaStatus = Answer<"GET /api/v1/auth/mfa">;

/** An SVG QR code of `text`, drawn from the module matrix (no inline HTML, so the CSP stays strict). */
function qrSvg(text: string) {
  const qr = qrcode(0, "M");
  qr.addData(text);
  qr.make();
  const n = qr.getModuleCount();
  const cells = [];
  for (let row = 0; row < n; row++) {
    for (let col = 0; col < n; col++) {
      if (qr.isDark(row, col)) cells.push(`M${col + 4},${row + 4}h1v1h-1z`);
    }
  }
  return html`
    <svg class="totp-qr" role="img" aria-label="QR code for the authenticator app"
      viewBox="0 0 ${n + 8} ${n + 8}" width="220" height="220" shape-rendering="crispEdges">
        ${svg`
          <rect width="100%" height="100%" fill="#fff"></rect>
          <path d=${cells.join("")} fill="#000"></path>
        `}
      </svg>
  `;
}

class SvcMfaSettings extends LightElement {
  static override properties = {
    ...stateProperties("status", "step", "enrolment", "backupCodes", "error", "busy", "keys"),
  };
  declare status: MfaStatus | undefined;
  /** Security keys and passkeys. */
  declare keys: KeyInfo[];
  /** The key a removal is for. */
  #removeKey: KeyInfo | undefined;
  /** What the panel shows: the overview, the password prompt for an action, or the QR code. */
  declare step:
    | "overview"
    | "reauth-setup"
    | "reauth-remove"
    | "reauth-codes"
    | "scan"
    | "reauth-addkey"
    | "reauth-removekey";
  declare enrolment: { secret: string; otpauth_uri: string } | undefined;
  /** New backup codes: shown this once. */
  declare backupCodes: string[] | undefined;
  declare error: unknown;
  declare busy: boolean;
  #proof: Record<string, string> = {};

  constructor() {
    super();
    this.step = "overview";
    this.busy = false;
    this.keys = [];
  }

  override connectedCallback(): void {
    super.connectedCallback();
    this.#load();
  }

  async #load(): Promise<void> {
    try {
      this.status = await api.call("GET /api/v1/auth/mfa");
      this.keys = (await api.call("GET /api/v1/auth/webauthn/credentials")).items;
    } catch (err) {
      this.error = err;
    }
  }

  #has(): boolean {
    return (this.status?.totp ?? false) || (this.status?.webauthn ?? 0) > 0;
  }

  async #reauth(e: Event): Promise<void> {
    e.preventDefault();
    const proof: StepUpProof = { password: this.#proof.password ?? "" };
    if (this.#has() && this.#proof.code) {
      proof[/^[0-9]{6}$/.test(this.#proof.code.trim()) ? "code" : "backup_code"] = this.#proof.code.trim();
    }
    const keyName = (this.#proof.keyName ?? "").trim();
    if (this.step === "reauth-addkey" && !keyName) {
      this.error = new Error("Name the key (for example: Laptop, Phone, Yubikey).");
      return;
    }
    this.busy = true;
    try {
      // No code typed, but a key registered: the key is the second factor of this step-up.
      if (this.#has() && !this.#proof.code && (this.status?.webauthn ?? 0) > 0 && webauthnAvailable()) {
        Object.assign(proof, await stepUpWithKey());
      }
      if (this.step === "reauth-addkey") {
        await registerKey(keyName, proof);
        notify(`The key “${keyName}” was added.`, "success");
        this.step = "overview";
      } else if (this.step === "reauth-removekey") {
        await api.call("DELETE /api/v1/auth/webauthn/credentials/{id}", {
          path: { id: this.#removeKey!.id },
          body: proof,
        });
        notify(`The key “${this.#removeKey!.name}” was removed.`, "success");
        this.step = "overview";
      } else if (this.step === "reauth-setup") {
        this.enrolment = await api.call("POST /api/v1/auth/mfa/totp", { body: proof });
        this.step = "scan";
      } else if (this.step === "reauth-remove") {
        await api.call("DELETE /api/v1/auth/mfa/totp", { body: proof });
        notify("The authenticator app was removed.", "success");
        this.step = "overview";
      } else {
        this.backupCodes =
          (await api.call("POST /api/v1/auth/mfa/backup-codes", { body: proof })).backup_codes;
        this.step = "overview";
      }
      this.error = undefined;
      this.#proof = {};
      await this.#changed();
    } catch (err) {
      this.error = err;
    } finally {
      this.busy = false;
    }
  }

  async #confirm(e: Event): Promise<void> {
    e.preventDefault();
    this.busy = true;
    try {
      const answer = await api.call("POST /api/v1/auth/mfa/totp/confirm", {
        body: { code: (this.#proof.confirm ?? "").trim() },
      });
      this.backupCodes = answer.backup_codes;
      this.enrolment = undefined;
      this.step = "overview";
      this.error = undefined;
      this.#proof = {};
      notify("The authenticator app is set up.", "success");
      await this.#changed();
    } catch (err) {
      this.error = err;
    } finally {
      this.busy = false;
    }
  }

  /** Reloads the status and `/auth/me` (which lifts the enrolment requirement). */
  async #changed(): Promise<void> {
    await this.#load();
    await session.load();
  }

  #renderReauth(label: string) {
    return html`
      <form class="card form-grid mfa-reauth" @submit=${this.#reauth}>
        ${this.step === "reauth-addkey"
          ? html`
            <sl-input name="key-name" label="Name of the key" required maxlength="100"
              help-text="For example: Laptop, Phone, Yubikey"
              @sl-input=${(e: Event) => this.#proof.keyName = valueOf(e)}></sl-input>
          `
          : nothing}
        <p>Confirm it is you.</p>
        <sl-input name="password" type="password" label="Your password" required password-toggle
          autocomplete="current-password" help-text=${fieldError(this.error, "password")}
          @sl-input=${(e: Event) => this.#proof.password = valueOf(e)}></sl-input>
        ${this.#has()
          ? html`
            <sl-input name="code" label="Code from your app, or a backup code" autocomplete="one-time-code"
              help-text=${(this.status?.webauthn ?? 0) > 0 ? "Leave empty to use your security key" : ""}
              @sl-input=${(e: Event) => this.#proof.code = valueOf(e)}></sl-input>
          `
          : nothing}
        <div class="actions">
          <sl-button type="submit" variant="primary" ?loading=${this.busy}>${label}</sl-button>
          <sl-button @click=${() => {
            this.step = "overview";
            this.error = undefined;
          }}>Cancel</sl-button>
        </div>
      </form>
    `;
  }

  #renderScan() {
    const e = this.enrolment!;
    return html`
      <form class="card form-grid mfa-scan" @submit=${this.#confirm}>
        <p>Scan this code with your authenticator app (or type the key), then enter the code it shows.</p>
        ${qrSvg(e.otpauth_uri)}
        <p>Key: <code class="totp-secret">${e.secret.replace(/(.{4})/g, "$1 ").trim()}</code>
          <sl-copy-button value=${e.secret} copy-label="Copy the key" success-label="Key copied">
            <sl-icon slot="copy-icon" name="copy" label="Copy the key"></sl-icon>
          </sl-copy-button></p>
        <sl-input name="confirm" label="Code from the app" inputmode="numeric" autocomplete="one-time-code"
          maxlength="6" required help-text=${fieldError(this.error, "code")}
          @sl-input=${(ev: Event) => this.#proof.confirm = valueOf(ev)}></sl-input>
        <div class="actions">
          <sl-button type="submit" variant="primary" ?loading=${this.busy}>Confirm</sl-button>
          <sl-button @click=${() => {
            this.step = "overview";
            this.enrolment = undefined;
          }}>Cancel</sl-button>
        </div>
      </form>
    `;
  }

  override render() {
    const s = this.status;
    if (!s) return html`${errorAlert(this.error)}${this.error ? nothing : html`<sl-spinner></sl-spinner>`}`;
    return html`
      <section class="mfa-settings">
        <h2>Second factors</h2>
        ${errorAlert(this.error)}
        ${this.backupCodes
          ? html`
            <sl-alert variant="success" open class="backup-codes">
              <strong>Your backup codes</strong>: save them now, they are not shown again. Each works once
              when the app is not at hand.
              <ol class="backup-code-list">${this.backupCodes.map((c) =>
                html`<li><code>${c}</code></li>`
              )}</ol>
              <sl-copy-button value=${this.backupCodes.join(
                "\n",
              )} copy-label="Copy the codes" success-label="Codes copied">
                <sl-icon slot="copy-icon" name="copy" label="Copy the codes"></sl-icon>
              </sl-copy-button>
            </sl-alert>
          `
          : nothing}
        <p class="mfa-state">
          Authenticator app: <strong>${s.totp ? "set up" : "not set up"}</strong>${s.totp
            ? html`
              · backup codes left: <strong>${s.backup_codes_left}</strong>
            `
            : nothing}
          ${s.required && !this.#has()
            ? html`<sl-badge variant="warning">required by the MFA policy</sl-badge>`
            : nothing}
        </p>
        ${this.step === "scan"
          ? this.#renderScan()
          : this.step === "reauth-setup"
          ? this.#renderReauth("Continue")
          : this.step === "reauth-remove"
          ? this.#renderReauth("Remove the app")
          : this.step === "reauth-codes"
          ? this.#renderReauth("New backup codes")
          : this.step === "reauth-addkey"
          ? this.#renderReauth("Add the key")
          : this.step === "reauth-removekey"
          ? this.#renderReauth(`Remove “${this.#removeKey?.name ?? ""}”`)
          : html`
            <div class="actions">
              ${s.totp
                ? html`
                  <sl-button @click=${() => this.step = "reauth-codes"}>New backup codes</sl-button>
                  <sl-button variant="danger" outline @click=${() => this.step = "reauth-remove"}>
                    Remove the authenticator app</sl-button>
                `
                : html`
                  <sl-button variant="primary" class="setup-totp"
                    @click=${() => this.step = "reauth-setup"}>Set up an authenticator app</sl-button>
                `}
            </div>
          `}
        <h3>Security keys and passkeys</h3>
        ${this.keys.length === 0 ? html`<p class="no-keys">No security key yet.</p>` : html`
          <table class="data-table webauthn-keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Added</th>
                <th scope="col">Last used</th>
                <th scope="col"><span class="visually-hidden">Actions</span></th>
              </tr>
            </thead>
            <tbody>${this.keys.map((k) =>
              html`
                <tr>
                  <td class="key-name">${k.name}</td>
                  <td>${new Date(k.created_at).toLocaleString()}</td>
                  <td>${k.last_used_at ? new Date(k.last_used_at).toLocaleString() : "never"}</td>
                  <td>
                    <sl-button size="small" variant="danger" outline class="remove-key"
                      aria-label="Remove ${k.name}" ?disabled=${this.step !== "overview"} @click=${() => {
                        this.#removeKey = k;
                        this.step = "reauth-removekey";
                      }}>Remove</sl-button>
                  </td>
                </tr>
              `
            )}</tbody>
          </table>
        `}
        ${this.step === "overview"
          ? html`
            <sl-button class="add-key" ?disabled=${!webauthnAvailable()}
              @click=${() => this.step = "reauth-addkey"}>Add a security key or passkey</sl-button>
          `
          : nothing}
      </section>
    `;
  }
}

customElements.define("svc-mfa-settings", SvcMfaSettings);

class SvcMfaRequiredPage extends LightElement {
  override connectedCallback(): void {
    super.connectedCallback();
    document.title = "Set up a second factor · svc";
  }

  override render() {
    return html`
      <main id="main" class="login mfa-required">
        <div class="login-card">
          <h1><img src="/assets/favicon.svg" alt="" width="32" height="32"> Set up a second factor</h1>
          <p>Your administrator requires a second factor for your account. Set up an authenticator app
            (for example on your phone) to continue.</p>
          <svc-mfa-settings></svc-mfa-settings>
          <sl-button variant="text" @click=${() => session.logout()}>Log out</sl-button>
        </div>
      </main>
    `;
  }
}

customElements.define("svc-mfa-required-page", SvcMfaRequiredPage);
