/**
 * `<svc-mfa-step-up-dialog>`: asks for the password (and a code from the authenticator app, or a backup code)
 * when the server answers a dangerous action with `reauthentication_required` or `second_factor_required`;
 * the API client then repeats the request with the proof. Registered with {@link api.stepUp} on import.
 */
import { html, LitElement } from "lit";
import { api } from "../api.ts";

/** The proof fields the server's step-up check reads. */
type Proof = Record<string, string>;

class SvcMfaStepUpDialog extends LitElement {
  static override properties = { needCode: { attribute: false } };
  declare needCode: boolean;
  #done = false;
  #password = "";
  #code = "";

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override firstUpdated(): void {
    const dialog = this.querySelector("sl-dialog") as HTMLElement & { show(): Promise<void> };
    void dialog.show();
  }

  #finish(proof: Proof | undefined): void {
    if (this.#done) return;
    this.#done = true;
    this.dispatchEvent(new CustomEvent("svc-step-up-done", { detail: proof }));
  }

  #submit(e: Event): void {
    e.preventDefault();
    const code = this.#code.trim();
    const proof: Proof = { password: this.#password };
    if (code) proof[/^[0-9]{6}$/.test(code) ? "code" : "backup_code"] = code;
    this.#finish(proof);
  }

  override render() {
    return html`
      <sl-dialog label="Confirm it is you" @sl-after-hide=${(e: Event) => {
        if (e.target === e.currentTarget) this.#finish(undefined);
      }}>
        <form class="form-grid step-up-form" @submit=${this.#submit}>
          <p>This change needs your password${this.needCode
            ? " and a code from your authenticator app"
            : ""}.</p>
          <sl-input name="step-up-password" type="password" label="Your password" required password-toggle
            autocomplete="current-password" @sl-input=${(e: Event) =>
              this.#password = String((e.target as HTMLInputElement).value)}></sl-input>
          <sl-input name="step-up-code" label="Code from your app, or a backup code" autocomplete="one-time-code"
            help-text=${this.needCode ? "" : "Only when you have set up an authenticator app"}
            @sl-input=${(e: Event) => this.#code = String((e.target as HTMLInputElement).value)}></sl-input>
          <button type="submit" hidden></button>
        </form>
        <sl-button slot="footer" class="step-up-cancel" @click=${() =>
          this.#finish(undefined)}>Cancel</sl-button>
        <sl-button slot="footer" class="step-up-ok" variant="primary" @click=${(e: Event) => this.#submit(e)}>
          Confirm</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-mfa-step-up-dialog", SvcMfaStepUpDialog);

/** Opens the dialog; resolves with the proof, or undefined when cancelled. Focus returns where it was. */
export function askStepUp(needCode: boolean): Promise<Proof | undefined> {
  const previous = document.activeElement as HTMLElement | null;
  return new Promise((resolve) => {
    const dialog = document.createElement("svc-mfa-step-up-dialog") as HTMLElement & { needCode: boolean };
    dialog.needCode = needCode;
    dialog.addEventListener("svc-step-up-done", (e) => {
      dialog.remove();
      previous?.focus?.();
      resolve((e as CustomEvent<Proof | undefined>).detail);
    }, { once: true });
    document.body.append(dialog);
  });
}

api.stepUp = (code) => askStepUp(code === "second_factor_required");
