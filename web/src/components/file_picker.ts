/**
 * `<svc-file-picker>`: choosing a file with the console's look instead of the browser's "Choose File" button
 * and its "No file chosen" text. The native input stays in the page (keyboard, screen readers, drag and
 * drop onto the label) but is visually hidden; a button-like label and the chosen file's name show. The
 * input's own `change` event bubbles out of the element, so a page reads `event.target.files` as before.
 */
import { html } from "lit";
import { LightElement } from "./light_element.ts";

class SvcFilePicker extends LightElement {
  static override properties = {
    label: {},
    accept: {},
    buttonLabel: { attribute: "button-label" },
    accessibleName: { attribute: "accessible-name" },
    chosen: { state: true },
  };
  /** The visible label above the picker ("Bundle file"); empty for none. */
  declare label: string;
  /** The input's `accept` list. */
  declare accept: string;
  /** The button's text. */
  declare buttonLabel: string;
  /** The input's accessible name when it should say more than the label (e.g. which row it belongs to). */
  declare accessibleName: string;
  declare chosen: string;

  constructor() {
    super();
    this.label = "";
    this.accept = "";
    this.buttonLabel = "Choose a file…";
    this.accessibleName = "";
    this.chosen = "";
  }

  /** Forgets the chosen file (after an upload), so choosing the same file again fires `change` again. */
  reset(): void {
    const input = this.querySelector("input");
    if (input) input.value = "";
    this.chosen = "";
  }

  override render() {
    return html`
      <div class="file-picker">
        ${this.label ? html`<span class="file-picker-label" aria-hidden="true">${this.label}</span>` : ""}
        <label class="file-picker-control">
          <input type="file" class="visually-hidden" accept=${this.accept}
            aria-label=${this.accessibleName || this.label || this.buttonLabel}
            @change=${(e: Event) => {
              const files = (e.target as HTMLInputElement).files;
              this.chosen = files?.length ? [...files].map((f) => f.name).join(", ") : "";
            }}>
          <span class="file-picker-button" aria-hidden="true"><sl-icon name="upload"></sl-icon>${this
            .buttonLabel}</span>
          <span class="file-picker-name" aria-live="polite">${this.chosen || "No file chosen"}</span>
        </label>
      </div>
    `;
  }
}

customElements.define("svc-file-picker", SvcFilePicker);
