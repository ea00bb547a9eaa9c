/**
 * `<svc-session-lockout-dialog>` behind {@linkcode askLockoutReason}: when a server lockout guard refuses a
 * release or a binding (SessionAccess: no named account could log in at some time of the week; Privilege: nobody
 * but root would administer the group's nodes), the person sees why (for SessionAccess which accounts and when),
 * and may go ahead only by giving a reason, which the server audits.
 */
import { html } from "lit";
import { LightElement } from "./light_element.ts";
import { ApiError } from "../api.ts";
import { listWords, parseLockout, plainLockoutMessage } from "../lockout_text.ts";
import { openDialog, whenHidden } from "./ui.ts";

class SvcSessionLockoutDialog extends LightElement {
  static override properties = { message: { attribute: false }, reason: { state: true } };
  declare message: string;
  declare reason: string;
  #done = false;

  constructor() {
    super();
    this.message = "";
    this.reason = "";
  }

  override firstUpdated(): void {
    void openDialog(this.querySelector("sl-dialog"));
  }

  #finish(reason: string | undefined): void {
    if (this.#done) return;
    this.#done = true;
    this.dispatchEvent(new CustomEvent("svc-lockout-done", { detail: reason }));
  }

  /** The server's refusal in words (see `lockout_text.ts`). */
  #explanation() {
    const parsed = parseLockout(this.message);
    if (!parsed) return html`<p class="lockout-message">${plainLockoutMessage(this.message)}</p>`;
    return html`
      <div class="lockout-message">
        <p>${parsed.where}.</p>
        <p>The SessionAccess rules name ${listWords(parsed.accounts)}. None of them could log in at these
          times (${parsed.zone}):</p>
        <ul class="lockout-times">
          ${parsed.times.map((t) => html`<li>${t}</li>`)}
          ${parsed.more ? html`<li>and ${parsed.more} more</li>` : ""}
        </ul>
        <p>Check the rules, or say why this is intended to go ahead anyway.</p>
      </div>
    `;
  }

  override render() {
    const ok = this.reason.trim().length >= 3;
    return html`
      <sl-dialog label=${parseLockout(this.message)
        ? "Nobody could log in at some times"
        : "This would lock people out"}
        @sl-after-hide=${whenHidden(() => this.#finish(undefined))}>
        ${this.#explanation()}
        <sl-textarea class="lockout-reason" label="Reason to go ahead (recorded in the audit log)" rows="3"
          .value=${this.reason} @sl-input=${(e: Event) =>
            this.reason = String((e.target as HTMLTextAreaElement).value)}></sl-textarea>
        <sl-button slot="footer" @click=${() => this.#finish(undefined)}>Cancel</sl-button>
        <sl-button slot="footer" variant="danger" class="lockout-confirm" ?disabled=${!ok}
          @click=${() => this.#finish(this.reason.trim())}>Go ahead</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-session-lockout-dialog", SvcSessionLockoutDialog);

/**
 * Sends a change guarded by the SessionAccess lockout guard: `send(undefined)` first; when the guard refuses
 * it, asks the person for a reason and sends `send(reason)` once more (the server audits the reason). Any
 * other error, a cancelled question or a second refusal is thrown.
 */
export async function withLockoutReason<T>(send: (reason: string | undefined) => Promise<T>): Promise<T> {
  try {
    return await send(undefined);
  } catch (err) {
    const reason = await askLockoutReason(err);
    if (!reason) throw err;
    return await send(reason);
  }
}

/** `{ lockout_reason }` when there is one, to spread into a request body. */
export function lockoutField(reason: string | undefined): { lockout_reason?: string } {
  return reason ? { lockout_reason: reason } : {};
}

/**
 * For an error that is the lockout guard's refusal: asks for a reason and resolves it (undefined when the
 * person cancels). Resolves undefined at once for any other error.
 */
export function askLockoutReason(err: unknown): Promise<string | undefined> {
  if (!(err instanceof ApiError) || err.status !== 409 || !err.message.includes("lockout_reason")) {
    return Promise.resolve(undefined);
  }
  const previous = document.activeElement as HTMLElement | null;
  return new Promise((resolve) => {
    const dialog = document.createElement("svc-session-lockout-dialog") as HTMLElement & { message: string };
    dialog.message = err.message;
    dialog.addEventListener("svc-lockout-done", (e) => {
      dialog.remove();
      previous?.focus?.();
      resolve((e as CustomEvent<string | undefined>).detail);
    }, { once: true });
    document.body.append(dialog);
  });
}
