/**
 * `<svc-disk-reveal-dialog>`: reveals a volume's recovery key. The person gives a reason and their
 * password (step-up re-authentication); the server audits every attempt. A revealed key shows for two
 * minutes with a countdown and a copy button, then it is dropped from the page (closing the dialog drops it
 * at once). When the policy rotates after reveals, the dialog says the key will stop working.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing } from "lit";
import { type Answer, api } from "../api.ts";
import { errorText } from "./page.ts";
import { notify } from "./ui.ts";

/** The volume a reveal is for. */
export interface RevealTarget {
  id: string;
  node_name: string;
  luks_uuid: string;
  device: string;
}

/** The answer of a reveal: the key, the other keys that open the volume, how long to show them. */
type RevealAnswer = Answer<"POST /api/v1/disk-encryption/volumes/{id}/reveal">;

class SvcDiskRevealDialog extends LightElement {
  static override properties = {
    target: { attribute: false },
    ...stateProperties("revealed", "remaining", "error", "busy", "expired"),
  };
  declare target: RevealTarget | undefined;
  declare revealed: RevealAnswer | undefined;
  declare remaining: number;
  declare error: string;
  declare busy: boolean;
  declare expired: boolean;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor() {
    super();
    this.remaining = 0;
    this.error = "";
    this.busy = false;
    this.expired = false;
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    this.#hide();
  }

  #hide(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.revealed = undefined;
    this.remaining = 0;
  }

  #close(): void {
    this.#hide();
    this.dispatchEvent(new CustomEvent("close", { bubbles: true, composed: true }));
  }

  async #submit(e: Event): Promise<void> {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const data = new FormData(form);
    const reason = String(data.get("reason") ?? "").trim();
    const password = String(data.get("password") ?? "");
    if (reason.length < 3) {
      this.error = "Say why the key is needed (at least 3 characters).";
      return;
    }
    if (!password) {
      this.error = "Enter your password to confirm it is you.";
      return;
    }
    this.busy = true;
    this.error = "";
    try {
      const answer = await api.call("POST /api/v1/disk-encryption/volumes/{id}/reveal", {
        path: { id: this.target!.id },
        body: { reason, password },
      });
      form.reset();
      this.revealed = answer;
      this.expired = false;
      this.remaining = answer.display_seconds;
      this.#timer = setInterval(() => {
        this.remaining -= 1;
        if (this.remaining <= 0) {
          this.#hide();
          this.expired = true;
        }
      }, 1000);
    } catch (err) {
      this.error = errorText(err);
    } finally {
      this.busy = false;
    }
  }

  async #copy(): Promise<void> {
    if (!this.revealed) return;
    try {
      await navigator.clipboard.writeText(this.revealed.recovery_key);
      notify("Recovery key copied", "success");
    } catch {
      notify("The browser refused clipboard access; select the key and copy it by hand", "warning");
    }
  }

  override render() {
    const t = this.target;
    if (!t) return nothing;
    const minutes = Math.floor(this.remaining / 60);
    const seconds = String(this.remaining % 60).padStart(2, "0");
    return html`
      <sl-dialog open label="Reveal recovery key" class="disk-reveal"
        @sl-request-close=${() => this.#close()}>
        <p>Volume <code>${t.luks_uuid}</code> (${t.device}) on <strong>${t.node_name}</strong>.</p>
        ${this.revealed
          ? html`
            <div role="status" aria-live="polite">
              <p>Type this key when the volume asks for a passphrase:</p>
              <p><code class="recovery-key" data-testid="recovery-key">${this.revealed
                .recovery_key}</code></p>
              ${this.revealed.alternate_keys.length
                ? html`
                  <p>A key change was in progress on this volume. If the key above is refused, try:</p>
                  ${this.revealed.alternate_keys.map((a) =>
                    html`<p><code class="recovery-key" data-testid="alternate-key">${a.recovery_key}</code></p>`
                  )}
                `
                : nothing}
              <p class="muted" data-testid="countdown">Hidden again in ${minutes}:${seconds}.</p>
              ${this.revealed.rotation_scheduled
                ? html`<p>The node replaces this key at its next contact; afterwards it no longer opens the volume.</p>`
                : nothing}
            </div>
            <sl-button variant="primary" @click=${() => this.#copy()}>
              <sl-icon slot="prefix" name="clipboard"></sl-icon>Copy
            </sl-button>
            <sl-button @click=${() => {
              this.#hide();
              this.expired = true;
            }}>Hide now</sl-button>
          `
          : html`
            ${this.expired
              ? html`<p role="status">The key is hidden again. Revealing it again is audited again.</p>`
              : nothing}
            <form @submit=${(e: Event) => this.#submit(e)}>
              <p>Every reveal is recorded in the audit log with your name and reason.</p>
              <label>Reason
                <textarea name="reason" required minlength="3" maxlength="1000" rows="2"></textarea>
              </label>
              <label>Your password (re-authentication)
                <input name="password" type="password" autocomplete="current-password" required />
              </label>
              ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
              <sl-button type="submit" variant="danger" ?loading=${this.busy}>Reveal key</sl-button>
            </form>
          `}
        <sl-button slot="footer" @click=${() => this.#close()}>Close</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-disk-reveal-dialog", SvcDiskRevealDialog);
