/**
 * `<svc-mfa-policy-settings>`: who must have a second factor (`/api/v1/settings/mfa`): nobody, everyone who
 * logs in with a password, or whoever holds one of the chosen permissions; directory users optionally too.
 * Saving asks for the editor's password (and code, when they have a factor).
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing } from "lit";
import { type Answer, api } from "../api.ts";
import { ALL_PERMISSIONS } from "../../../shared/permissions.ts";
import { session } from "../session.ts";
import { errorAlert, fieldError, notify, valueOf } from "./ui.ts";

type MfaPolicy = Answer<"GET /api/v1/settings/mfa">;

class SvcMfaPolicySettings extends LightElement {
  static override properties = {
    ...stateProperties("policy", "error", "busy"),
  };
  declare policy: MfaPolicy | undefined;
  declare error: unknown;
  declare busy: boolean;
  #proof: Record<string, string> = {};

  override connectedCallback(): void {
    super.connectedCallback();
    api.call("GET /api/v1/settings/mfa").then((p) => this.policy = p, (err) => this.error = err);
  }

  async #save(e: Event): Promise<void> {
    e.preventDefault();
    const p = this.policy!;
    const code = (this.#proof.code ?? "").trim();
    this.busy = true;
    try {
      this.policy = await api.call("PUT /api/v1/settings/mfa", {
        body: {
          ...p,
          password: this.#proof.password ?? "",
          ...(code ? { [/^[0-9]{6}$/.test(code) ? "code" : "backup_code"]: code } : {}),
        },
      });
      this.error = undefined;
      notify("MFA policy saved.", "success");
      await session.load();
    } catch (err) {
      this.error = err;
    } finally {
      this.busy = false;
    }
  }

  override render() {
    const p = this.policy;
    if (!p) return html`${errorAlert(this.error)}${this.error ? nothing : html`<sl-spinner></sl-spinner>`}`;
    const readOnly = !session.can("settings:edit");
    return html`
      <form class="card form-grid mfa-policy" @submit=${this.#save}>
        <h2>MFA policy</h2>
        ${errorAlert(this.error)}
        <sl-radio-group name="mode" label="Who must have a second factor" value=${p.mode}
          @sl-change=${(e: Event) => this.policy = { ...p, mode: valueOf(e) as MfaPolicy["mode"] }}>
          <sl-radio value="off" ?disabled=${readOnly}>Nobody (each person chooses)</sl-radio>
          <sl-radio value="all" ?disabled=${readOnly}>Everyone who logs in with a password</sl-radio>
          <sl-radio value="permissions" ?disabled=${readOnly}>Whoever holds one of these permissions</sl-radio>
        </sl-radio-group>
        ${p.mode === "permissions"
          ? html`
            <sl-select name="permissions" label="Permissions" multiple clearable max-options-visible="6"
              .value=${p.permissions} ?disabled=${readOnly} help-text=${fieldError(this.error, "permissions")}
              @sl-change=${(e: Event) =>
                this.policy = { ...p, permissions: [...(e.target as unknown as { value: string[] }).value] }}>
                        ${ALL_PERMISSIONS.map((perm) => html`<sl-option value=${perm}>${perm}</sl-option>`)}
                      </sl-select>
          `
          : nothing}
        <sl-checkbox ?checked=${p.include_ldap} ?disabled=${readOnly}
          @sl-change=${(e: Event) =>
            this.policy = { ...p, include_ldap: (e.target as HTMLInputElement).checked }}>
          Directory (LDAP) users too</sl-checkbox>
        ${readOnly ? nothing : html`
          <sl-input name="password" type="password" label="Your password" required password-toggle
            autocomplete="current-password" @sl-input=${(e: Event) =>
              this.#proof.password = valueOf(e)}></sl-input>
          ${session.me?.secondFactor.totp
            ? html`
              <sl-input name="code" label="Code from your app, or a backup code"
                autocomplete="one-time-code" @sl-input=${(e: Event) =>
                  this.#proof.code = valueOf(e)}></sl-input>
            `
            : nothing}
          <sl-button type="submit" variant="primary" ?loading=${this.busy}>Save the policy</sl-button>
        `}
      </form>
    `;
  }
}

customElements.define("svc-mfa-policy-settings", SvcMfaPolicySettings);
