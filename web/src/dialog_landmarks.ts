/**
 * Shoelace's `<sl-dialog>` and `<sl-drawer>` render their title bar and button row as `<header>` and
 * `<footer>` in their shadow root. A dialog opened on `<body>` (confirmations, step-up, the lockout guard) or
 * in the masthead (the deploy-agent wizard) is outside `<main>`, where those elements are the page's banner
 * and contentinfo landmarks: a second of each, which screen-reader users navigate by. Inside a dialog they are
 * no landmarks, so they are given `role="none"` (their content keeps its own roles) after every render.
 */

type Rendering = { prototype: { updated(changed: Map<PropertyKey, unknown>): void } };

for (const tag of ["sl-dialog", "sl-drawer"]) {
  void customElements.whenDefined(tag).then((ctor) => {
    const proto = (ctor as unknown as Rendering).prototype;
    const updated = proto.updated;
    proto.updated = function (this: HTMLElement, changed: Map<PropertyKey, unknown>) {
      updated.call(this, changed);
      for (const el of this.shadowRoot?.querySelectorAll("header, footer") ?? []) {
        if (el.getAttribute("role") !== "none") el.setAttribute("role", "none");
      }
    };
  });
}
