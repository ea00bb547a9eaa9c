/**
 * `<svc-confirm-dialog>`: the modal behind {@link confirmAction}; fires `svc-confirm-done` with true/false.
 * Opening it puts the focus on the control a keyboard user needs first (the text to type, Cancel for a
 * destructive action, else the confirm button); `confirmAction` gives the focus back afterwards.
 */
import { html, nothing } from "lit";
import { type ConfirmOptions, openDialog } from "./ui.ts";
import { LightElement } from "./light_element.ts";

class SvcConfirmDialog extends LightElement {
  static override properties = { options: { attribute: false }, typed: { state: true } };
  declare options: ConfirmOptions;
  declare typed: string;
  #done = false;

  constructor() {
    super();
    this.typed = "";
  }

  override firstUpdated(): void {
    void openDialog(this.querySelector("sl-dialog"));
  }

  #initialFocus(): HTMLElement | null {
    const o = this.options;
    const selector = o.typeToConfirm !== undefined
      ? ".confirm-typed"
      : o.danger
      ? ".confirm-cancel"
      : ".confirm-ok";
    return this.querySelector<HTMLElement>(selector);
  }

  #finish(result: boolean): void {
    if (this.#done) return;
    this.#done = true;
    this.dispatchEvent(new CustomEvent("svc-confirm-done", { detail: result }));
  }

  override render() {
    const o = this.options;
    const blocked = o.typeToConfirm !== undefined && this.typed !== o.typeToConfirm;
    return html`
      <sl-dialog label=${o.title} @sl-initial-focus=${(e: Event) => {
        if (e.target !== e.currentTarget) return;
        e.preventDefault();
        this.#initialFocus()?.focus({ preventScroll: true });
      }} @sl-after-hide=${(e: Event) => {
        if (e.target === e.currentTarget) this.#finish(false);
      }}>
        <div class="confirm-message">${o.message}</div>
        ${o.typeToConfirm !== undefined
          ? html`
            <sl-input
              class="confirm-typed"
              label=${`Type ${o.typeToConfirm} to confirm`}
              autocomplete="off"
              @sl-input=${(e: Event) => this.typed = String((e.target as HTMLInputElement).value)}
            ></sl-input>
          `
          : nothing}
        <sl-button slot="footer" class="confirm-cancel" @click=${() => this.#finish(false)}>${o.cancelLabel ??
          "Cancel"}</sl-button>
        <sl-button
          slot="footer"
          class="confirm-ok"
          variant=${o.danger ? "danger" : "primary"}
          ?disabled=${blocked}
          @click=${() => this.#finish(true)}
        >${o.confirmLabel}</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-confirm-dialog", SvcConfirmDialog);
