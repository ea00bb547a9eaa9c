/**
 * `LightElement`, the base of the console's own elements that render into the light DOM: the page's
 * stylesheet and Shoelace's theme reach their content, and the browser tests and the accessibility checks
 * find it by the page's roles and labels without piercing a shadow root.
 */
import { LitElement } from "lit";

/** A Lit element whose template renders into the element itself rather than a shadow root. */
export class LightElement extends LitElement {
  protected override createRenderRoot(): HTMLElement {
    return this;
  }
}
