/**
 * `<svc-settings-agent>`: the desktop notifications agents show after a sync that needs the user to act
 * (restart the browser, log in again) — on/off, the cooldown between two notifications, the default message
 * and per-type messages. Agents fetch them with `GetAgentConfig`.
 */
import { html, nothing } from "lit";
import { type Answer, api } from "../api.ts";
import { session } from "../session.ts";
import { listPolicyTypes } from "../../../shared/policy_types/mod.ts";
import { PageElement } from "./page.ts";
import { fieldError, formError, notify } from "./ui.ts";

/** `GET/PUT /api/v1/settings/agent`. */
type AgentSettings = Answer<"GET /api/v1/settings/agent">;

class SvcSettingsAgent extends PageElement {
  static override properties = PageElement.withState("settings", "saveError");
  declare settings: AgentSettings | undefined;
  declare saveError: unknown;

  protected override async load(): Promise<void> {
    const s = await api.call("GET /api/v1/settings/agent");
    this.settings = { ...s, messages_by_type: { ...(s.messages_by_type ?? {}) } };
  }

  #update(change: Partial<AgentSettings>): void {
    this.settings = { ...this.settings!, ...change };
  }

  async #save(e: Event): Promise<void> {
    e.preventDefault();
    const s = this.settings!;
    const byType = Object.fromEntries(Object.entries(s.messages_by_type).filter(([, m]) => m.trim() !== ""));
    try {
      const saved = await api.call("PUT /api/v1/settings/agent", {
        body: {
          enabled: s.enabled,
          cooldown_seconds: s.cooldown_seconds,
          message: s.message,
          messages_by_type: byType,
        },
      });
      this.settings = { ...saved, messages_by_type: { ...(saved.messages_by_type ?? {}) } };
      this.saveError = undefined;
      notify("Agent settings saved; agents pick them up when they next connect.", "success");
    } catch (err) {
      this.saveError = err;
    }
  }

  override render() {
    const s = this.settings;
    if (!s) {
      return html`${this.renderLoadError()}${this.loadError ? nothing : html`<sl-spinner></sl-spinner>`}`;
    }
    const readOnly = !session.can("settings:edit");
    const err = this.saveError;
    const f = (name: string) => ({
      class: fieldError(err, name) ? "has-error" : "",
      help: fieldError(err, name),
    });
    return html`
      <form class="agent-form form-grid" @submit=${this.#save}>
        ${formError(err)}
        <sl-switch ?checked=${s.enabled} ?disabled=${readOnly}
          @sl-change=${(e: Event) => this.#update({ enabled: (e.target as HTMLInputElement).checked })}>
          Show desktop notifications after a sync that needs the user to act</sl-switch>
        <sl-input type="number" label="Cooldown (seconds)" value=${String(
          s.cooldown_seconds,
        )} ?disabled=${readOnly}
          class=${f("cooldown_seconds").class}
          help-text=${f("cooldown_seconds").help ||
            "Minimum time between two notifications to the same user."}
          @sl-change=${(e: Event) =>
            this.#update({ cooldown_seconds: Number((e.target as HTMLInputElement).value) })}>
        </sl-input>
        <sl-textarea label="Default message" rows="2" value=${s.message} ?disabled=${readOnly} class=${f(
          "message",
        ).class}
          help-text=${f("message").help || "Used for every policy type without its own message."}
          @sl-change=${(e: Event) =>
            this.#update({ message: (e.target as HTMLTextAreaElement).value })}></sl-textarea>
        <fieldset class="card">
          <legend>Messages per policy type (empty: the default message)</legend>
          ${listPolicyTypes().map((t) => {
            const name = `messages_by_type.${t.wireName}`;
            return html`
              <sl-input label=${t.wireName} value=${s.messages_by_type[t.wireName] ??
                ""} ?disabled=${readOnly}
                class=${f(name).class} help-text=${f(name).help}
                @sl-change=${(e: Event) =>
                  this.#update({
                    messages_by_type: {
                      ...s.messages_by_type,
                      [t.wireName]: (e.target as HTMLInputElement).value,
                    },
                  })}></sl-input>
            `;
          })}
        </fieldset>
        ${readOnly ? html`<p class="muted">Changing these needs the settings:edit permission.</p>` : html`
          <div class="form-actions">
            <sl-button type="submit" variant="primary">Save</sl-button>
          </div>
        `}
      </form>
    `;
  }
}

customElements.define("svc-settings-agent", SvcSettingsAgent);
