/**
 * `<svc-mfa-step-up-dialog>`: asks for the password and the second factor when the server answers a dangerous
 * action with `reauthentication_required` or `second_factor_required`; the API client then repeats the
 * request with the proof. The second factor is a code from the authenticator app, a backup code, or a
 * passkey / security key (the browser's WebAuthn prompt answers the server's step-up challenge), so a person
 * whose only factor is a passkey can pass too. Registered with {@link api.stepUp} on import.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing } from "lit";
import { api, type StepUpProof } from "../api.ts";
import { session } from "../session.ts";
import { stepUpWithKey, webauthnAvailable } from "../webauthn.ts";
import { errorAlert, openDialog, whenHidden } from "./ui.ts";

class SvcMfaStepUpDialog extends LightElement {
  static override properties = {
    needCode: { attribute: false },
    ...stateProperties("busy", "error"),
  };
  declare needCode: boolean;
  declare busy: boolean;
  declare error: unknown;
  #done = false;
  #password = "";
  #code = "";

  constructor() {
    super();
    this.needCode = false;
    this.busy = false;
    this.error = undefined;
  }

  override firstUpdated(): void {
    void openDialog(this.querySelector("sl-dialog"));
  }

  #finish(proof: StepUpProof | undefined): void {
    if (this.#done) return;
    this.#done = true;
    this.dispatchEvent(new CustomEvent("svc-step-up-done", { detail: proof }));
  }

  #submit(e: Event): void {
    e.preventDefault();
    const code = this.#code.trim();
    const proof: StepUpProof = { password: this.#password };
    if (code) proof[/^[0-9]{6}$/.test(code) ? "code" : "backup_code"] = code;
    this.#finish(proof);
  }

  /** The password and the key's answer to a fresh step-up challenge. */
  async #useKey(): Promise<void> {
    if (!this.#password) {
      this.error = new Error("Type your password first, then use your passkey or security key.");
      return;
    }
    this.busy = true;
    try {
      this.#finish({ password: this.#password, ...(await stepUpWithKey()) });
    } catch (err) {
      // Cancelled in the browser's prompt, or no registered key on this device: the dialog stays for another
      // try or a code.
      this.error = err;
    } finally {
      this.busy = false;
    }
  }

  override render() {
    const factors = session.me?.secondFactor;
    const hasCode = (factors?.totp ?? false) || (factors?.backupCodesLeft ?? 0) > 0;
    const hasKey = (factors?.webauthn ?? 0) > 0;
    // Offer what the person has; when the server asks for a second factor the session may be older than a
    // factor added elsewhere, so then offer both.
    const showCode = hasCode || this.needCode || !hasKey;
    const showKey = webauthnAvailable() && (hasKey || this.needCode);
    return html`
      <sl-dialog label="Confirm it is you" @sl-after-hide=${whenHidden(() => this.#finish(undefined))}>
        <form class="form-grid step-up-form" @submit=${this.#submit}>
          <p>This change needs your password${this.needCode || hasCode || hasKey
            ? showKey ? " and your second factor" : " and a code from your authenticator app"
            : ""}.</p>
          ${this.error ? errorAlert(this.error) : nothing}
          <sl-input name="step-up-password" type="password" label="Your password" required password-toggle
            autocomplete="current-password" @sl-input=${(e: Event) =>
              this.#password = String((e.target as HTMLInputElement).value)}></sl-input>
          ${showCode
            ? html`
              <sl-input name="step-up-code" label="Code from your app, or a backup code"
                autocomplete="one-time-code"
                help-text=${this.needCode || hasCode ? "" : "Only when you have set up an authenticator app"}
                @sl-input=${(e: Event) =>
                  this.#code = String((e.target as HTMLInputElement).value)}></sl-input>
            `
            : nothing}
          ${showKey
            ? html`
              <sl-button class="step-up-key" ?loading=${this.busy} @click=${() => this.#useKey()}>
                <sl-icon slot="prefix" name="key"></sl-icon>Use a passkey / security key</sl-button>
            `
            : nothing}
          <button type="submit" hidden></button>
        </form>
        <sl-button slot="footer" class="step-up-cancel" @click=${() =>
          this.#finish(undefined)}>Cancel</sl-button>
        <sl-button slot="footer" class="step-up-ok" variant="primary" ?disabled=${this.busy}
          @click=${(e: Event) => this.#submit(e)}>Confirm</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-mfa-step-up-dialog", SvcMfaStepUpDialog);

/** Opens the dialog; resolves with the proof, or undefined when cancelled. Focus returns where it was. */
export function askStepUp(needCode: boolean): Promise<StepUpProof | undefined> {
  const previous = document.activeElement as HTMLElement | null;
  return new Promise((resolve) => {
    const dialog = document.createElement("svc-mfa-step-up-dialog") as HTMLElement & { needCode: boolean };
    dialog.needCode = needCode;
    dialog.addEventListener("svc-step-up-done", (e) => {
      dialog.remove();
      previous?.focus?.();
      resolve((e as CustomEvent<StepUpProof | undefined>).detail);
    }, { once: true });
    document.body.append(dialog);
  });
}

api.stepUp = (code) => askStepUp(code === "second_factor_required");
