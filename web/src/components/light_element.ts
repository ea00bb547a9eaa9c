/**
 * `LightElement`, the base of the console's own elements that render into the light DOM: the page's
 * stylesheet and Shoelace's theme reach their content, and the browser tests and the accessibility checks
 * find it by the page's roles and labels without piercing a shadow root. With it, the two kinds of
 * reactive property most elements declare by the handful: those a parent sets from its template
 * (`.name=${…}`, no attribute) and the element's own state.
 */
import { LitElement, type PropertyDeclarations } from "lit";

/** A Lit element whose template renders into the element itself rather than a shadow root. */
export class LightElement extends LitElement {
  protected override createRenderRoot(): HTMLElement {
    return this;
  }
}

/** Declarations of properties a parent sets from its template only (`.name=${…}`): no attribute. */
export function boundProperties(...names: string[]): PropertyDeclarations {
  return Object.fromEntries(names.map((name) => [name, { attribute: false }]));
}

/** Declarations of an element's internal reactive state: a change re-renders, nothing is reflected. */
export function stateProperties(...names: string[]): PropertyDeclarations {
  return Object.fromEntries(names.map((name) => [name, { state: true }]));
}
