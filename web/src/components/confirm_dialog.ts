/** `<svc-confirm-dialog>`: the modal behind {@link confirmAction}; fires `svc-confirm-done` with true/false. */
import { html, LitElement, nothing } from "lit";
import type { ConfirmOptions } from "./ui.ts";

class SvcConfirmDialog extends LitElement {
  static override properties = { options: { attribute: false }, typed: { state: true } };
  declare options: ConfirmOptions;
  declare typed: string;
  #done = false;

  constructor() {
    super();
    this.typed = "";
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override firstUpdated(): void {
    const dialog = this.querySelector("sl-dialog") as HTMLElement & { show(): Promise<void> };
    void dialog.show();
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
      <sl-dialog label=${o.title} @sl-after-hide=${(e: Event) => {
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
        <sl-button slot="footer" class="confirm-cancel" @click=${() => this.#finish(false)}>Cancel</sl-button>
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
