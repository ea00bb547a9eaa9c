/**
 * `<svc-login-page>`: username and password. Shown in place of the app while there is no session — the URL
 * stays what it was, so after logging in the person is on the page they asked for.
 */
import { html, LitElement, nothing } from "lit";
import { session } from "../session.ts";
import { errorText } from "../components/page.ts";

class SvcLoginPage extends LitElement {
  static override properties = { busy: { state: true }, error: { state: true } };
  declare busy: boolean;
  declare error: unknown;

  constructor() {
    super();
    this.busy = false;
    this.error = undefined;
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    document.title = "Log in · svc";
  }

  override firstUpdated(): void {
    requestAnimationFrame(() => this.querySelector<HTMLElement>("sl-input[name=username]")?.focus());
  }

  async #submit(event: Event): Promise<void> {
    event.preventDefault();
    const value = (name: string) =>
      String(this.querySelector<HTMLInputElement>(`sl-input[name=${name}]`)?.value ?? "");
    const username = value("username").trim();
    const password = value("password");
    if (!username || !password) {
      this.error = new Error("Enter your username and password.");
      return;
    }
    this.busy = true;
    try {
      await session.login(username, password);
      this.error = undefined;
    } catch (err) {
      this.error = err;
    } finally {
      this.busy = false;
    }
  }

  override render() {
    return html`
      <main id="main" class="login">
        <form class="login-card" @submit=${this.#submit} novalidate>
          <h1><img src="/assets/favicon.svg" alt="" width="32" height="32"> Log in to svc</h1>
          ${this.error
            ? html`<sl-alert variant="danger" open class="login-error">
              <sl-icon slot="icon" name="exclamation-octagon"></sl-icon>${errorText(this.error)}
            </sl-alert>`
            : nothing}
          <sl-input name="username" label="Username" autocomplete="username" required></sl-input>
          <sl-input name="password" label="Password" type="password" autocomplete="current-password"
            password-toggle required></sl-input>
          <sl-button type="submit" variant="primary" ?loading=${this.busy}>Log in</sl-button>
        </form>
      </main>
    `;
  }
}

customElements.define("svc-login-page", SvcLoginPage);
