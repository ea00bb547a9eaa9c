/**
 * `<svc-login-page>`: username and password, then — for an account with a second factor — a code from the
 * authenticator app or a backup code. Shown in place of the app while there is no session — the URL stays
 * what it was, so after logging in the person is on the page they asked for.
 *
 * Both fields are asked together (never the username alone first), so the page does not tell who has an
 * account or which accounts have a second factor before the password is right.
 */
import { html, nothing } from "lit";
import { LightElement } from "../components/light_element.ts";
import { type SecondFactorChallenge, session } from "../session.ts";
import { errorText } from "../components/page.ts";
import { api } from "../api.ts";
import { loginWithKey, webauthnAvailable } from "../webauthn.ts";

class SvcLoginPage extends LightElement {
  static override properties = {
    busy: { state: true },
    error: { state: true },
    challenge: { state: true },
    useBackup: { state: true },
  };
  declare busy: boolean;
  declare error: unknown;
  /** Set after the right password when a second factor is needed. */
  declare challenge: SecondFactorChallenge | undefined;
  declare useBackup: boolean;

  constructor() {
    super();
    this.busy = false;
    this.error = undefined;
    this.challenge = undefined;
    this.useBackup = false;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    document.title = "Log in · svc";
  }

  override firstUpdated(): void {
    this.#focus("username");
  }

  #focus(name: string): void {
    requestAnimationFrame(() => this.querySelector<HTMLElement>(`sl-input[name=${name}]`)?.focus());
  }

  #value(name: string): string {
    return String(this.querySelector<HTMLInputElement>(`sl-input[name=${name}]`)?.value ?? "");
  }

  async #submit(event: Event): Promise<void> {
    event.preventDefault();
    const username = this.#value("username").trim();
    const password = this.#value("password");
    if (!username || !password) {
      this.error = new Error("Enter your username and password.");
      return;
    }
    this.busy = true;
    try {
      this.challenge = await session.login(username, password);
      this.error = undefined;
      if (this.challenge) this.#focus("code");
    } catch (err) {
      this.error = err;
    } finally {
      this.busy = false;
    }
  }

  async #submitCode(event: Event): Promise<void> {
    event.preventDefault();
    const code = this.#value("code").trim();
    if (!code) {
      this.error = new Error(this.useBackup ? "Enter one of your backup codes." : "Enter the 6-digit code.");
      return;
    }
    this.busy = true;
    try {
      await session.secondFactor(this.challenge!.token, this.useBackup ? { backup_code: code } : { code });
      this.error = undefined;
    } catch (err) {
      this.error = err;
      // The first step is spent (expired, used, too many wrong codes): start again with the password.
      if ((err as { code?: string }).code === "login_expired") this.challenge = undefined;
    } finally {
      this.busy = false;
    }
  }

  /** Logs in with a security key: after the password (`token`) or as a passkey alone. */
  async #withKey(token?: string): Promise<void> {
    this.busy = true;
    try {
      await loginWithKey(token);
      api.sessionStarted();
      this.error = undefined;
      await session.load();
    } catch (err) {
      this.error = err instanceof DOMException
        ? new Error("The security key did not answer (cancelled or timed out). Try again.")
        : err;
      if ((err as { code?: string }).code === "login_expired") this.challenge = undefined;
    } finally {
      this.busy = false;
    }
  }

  #renderError() {
    return this.error
      ? html`<sl-alert variant="danger" open class="login-error">
        <sl-icon slot="icon" name="exclamation-octagon"></sl-icon>${errorText(this.error)}
      </sl-alert>`
      : nothing;
  }

  override render() {
    const keyOnly = this.challenge && !this.challenge.methods.includes("totp") &&
      !this.challenge.methods.includes("backup_code");
    if (this.challenge) {
      const key = this.challenge.methods.includes("webauthn") && webauthnAvailable();
      return html`
        <main id="main" class="login">
          <form class="login-card second-factor" @submit=${this.#submitCode} novalidate>
            <h1><img src="/assets/favicon.svg" alt="" width="32" height="32"> Second factor</h1>
            ${this.#renderError()}
            ${key
              ? html`
                <sl-button class="use-key" variant=${keyOnly ? "primary" : "default"} ?loading=${this.busy}
                  @click=${() => this.#withKey(this.challenge!.token)}>Use my security key</sl-button>
              `
              : nothing}
            ${keyOnly ? nothing : this.useBackup
              ? html`
                <sl-input name="code" label="Backup code" autocomplete="off" required
                  help-text="One of the codes you saved when you set up the app; each works once"></sl-input>
              `
              : html`
                <sl-input name="code" label="Code from your authenticator app" inputmode="numeric"
                  autocomplete="one-time-code" maxlength="6" pattern="[0-9]{6}" required></sl-input>
              `}
            ${keyOnly ? nothing : html`
              <sl-button type="submit" variant="primary" ?loading=${this.busy}>Verify</sl-button>
              <sl-button variant="text" size="small" class="toggle-backup" @click=${() => {
                this.useBackup = !this.useBackup;
                this.error = undefined;
                this.#focus("code");
              }}>${this.useBackup ? "Use the authenticator app" : "Use a backup code"}</sl-button>
            `}
            <sl-button variant="text" size="small" @click=${() => {
              this.challenge = undefined;
              this.error = undefined;
              this.#focus("username");
            }}>Start over</sl-button>
          </form>
        </main>
      `;
    }
    return html`
      <main id="main" class="login">
        <form class="login-card" @submit=${this.#submit} novalidate>
          <h1><img src="/assets/favicon.svg" alt="" width="32" height="32"> Log in to svc</h1>
          ${this.#renderError()}
          <sl-input name="username" label="Username" autocomplete="username" required></sl-input>
          <sl-input name="password" label="Password" type="password" autocomplete="current-password"
            password-toggle required></sl-input>
          <sl-button type="submit" variant="primary" ?loading=${this.busy}>Log in</sl-button>
          ${webauthnAvailable()
            ? html`<sl-button class="passkey-login" ?loading=${this.busy} @click=${() => this.#withKey()}>
                Log in with a passkey</sl-button>`
            : nothing}
        </form>
      </main>
    `;
  }
}

customElements.define("svc-login-page", SvcLoginPage);
