/**
 * `<svc-settings-api-tokens>`: API tokens for scripts. Everyone manages their own; people who may view users
 * see everyone's and, with `user:edit`, may create tokens for service accounts and revoke others' tokens (the
 * server checks that they hold everything the account can reach). A new token is shown once, with a copy
 * button, and never again.
 */
import { html, nothing } from "lit";
import { type Answer, api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "./page.ts";
import {
  columns,
  confirmAction,
  errorAlert,
  fieldError,
  formatDate,
  notify,
  relativeTime,
  valueOf,
} from "./ui.ts";

/** `GET /api/v1/api-tokens` item. */
type ApiToken = Answer<"GET /api/v1/api-tokens">[number];

class SvcSettingsApiTokens extends PageElement {
  static override properties = PageElement.withState("tokens", "draft", "saveError", "shown");
  declare tokens: ApiToken[] | undefined;
  declare draft: { name: string; days: number };
  declare saveError: unknown;
  /** The token just created: its only appearance. */
  declare shown: { name: string; token: string } | undefined;

  constructor() {
    super();
    this.draft = { name: "", days: 90 };
  }

  protected override async load(): Promise<void> {
    this.tokens = await api.call("GET /api/v1/api-tokens");
  }

  async #create(e: Event): Promise<void> {
    e.preventDefault();
    try {
      const made = await api.call("POST /api/v1/api-tokens", {
        body: { name: this.draft.name, expires_in_days: Number(this.draft.days) },
      });
      this.saveError = undefined;
      this.shown = { name: made.api_token.name, token: made.token };
      this.draft = { name: "", days: this.draft.days };
      await this.reload();
    } catch (err) {
      this.saveError = err;
    }
  }

  async #revoke(t: ApiToken): Promise<void> {
    const ok = await confirmAction({
      title: `Revoke ${t.name}?`,
      message: `Scripts using this token of ${t.username} stop working at once.`,
      confirmLabel: "Revoke",
      danger: true,
    });
    if (!ok) return;
    await api.call("DELETE /api/v1/api-tokens/{id}", { path: { id: t.id } });
    notify(`Token ${t.name} revoked.`, "success");
    await this.reload();
  }

  #state(t: ApiToken) {
    if (t.revoked_at) return html`<sl-badge variant="neutral" pill>revoked</sl-badge>`;
    if (Date.parse(t.expires_at) <= Date.now()) {
      return html`<sl-badge variant="warning" pill>expired</sl-badge>`;
    }
    return html`<sl-badge variant="success" pill>active</sl-badge>`;
  }

  override render() {
    if (!this.tokens) {
      return html`${this.renderLoadError()}${this.loadError ? nothing : html`<sl-spinner></sl-spinner>`}`;
    }
    const me = session.me?.user.id;
    const mayRevokeOthers = session.can("user:edit");
    return html`
      ${this.shown
        ? html`
          <sl-alert variant="success" open class="new-token">
            <strong>Token ${this.shown.name}</strong>: copy it now, it is not shown again.
            <div class="token-line"><code>${this.shown.token}</code>
              <sl-copy-button value=${this.shown
                .token} copy-label="Copy the token" success-label="Token copied">
                <sl-icon slot="copy-icon" name="copy" label="Copy the token"></sl-icon>
              </sl-copy-button></div>
          </sl-alert>
        `
        : nothing}
      <table class="data-table api-tokens">
        <caption>API tokens (send as Authorization: Bearer)</caption>
        <thead>
          <tr>
            ${columns("Name", "User", "Starts with", "Expires", "Last used", "State")}
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          ${this.tokens.length === 0
            ? html`
              <tr>
                <td colspan="7" class="muted">No token yet.</td>
              </tr>
            `
            : this.tokens.map((t) =>
              html`
                <tr data-token=${t.name}>
                  <th scope="row">${t.name}</th>
                  <td>${t.username}</td>
                  <td><code>${t.hint}…</code></td>
                  <td title=${formatDate(t.expires_at)}>${formatDate(t.expires_at)}</td>
                  <td>${t.last_used_at ? relativeTime(t.last_used_at) : "never"}</td>
                  <td>${this.#state(t)}</td>
                  <td class="actions">${!t.revoked_at && (t.user_id === me || mayRevokeOthers)
                    ? html`
                      <sl-button size="small" variant="danger" outline
                        @click=${() => this.#revoke(t)}>Revoke<span class="visually-hidden"> ${t
                          .name}</span></sl-button>
                    `
                    : nothing}</td>
                </tr>
              `
            )}
        </tbody>
      </table>
      <form class="card form-grid api-token-form" @submit=${this.#create}>
        <h2>Create a token for yourself</h2>
        ${errorAlert(this.saveError)}
        <sl-input name="name" label="Name" required .value=${this.draft.name}
          help-text=${fieldError(this.saveError, "name") || "What the script is, e.g. nightly-report"}
          @sl-input=${(e: Event) => this.draft = { ...this.draft, name: valueOf(e) }}></sl-input>
        <sl-input name="days" type="number" min="1" max="365" label="Valid for (days)" required
          .value=${String(this.draft.days)} help-text=${fieldError(this.saveError, "expires_in_days") ||
            "At most 365"}
          @sl-input=${(e: Event) => this.draft = { ...this.draft, days: Number(valueOf(e)) }}></sl-input>
        <sl-button type="submit" variant="primary">Create token</sl-button>
      </form>
    `;
  }
}

customElements.define("svc-settings-api-tokens", SvcSettingsApiTokens);
