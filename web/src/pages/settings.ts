/**
 * `/settings`: users, roles with their permission matrix, user groups, role bindings and the agent
 * notification messages. Tabs the person may not see are left out; the tab is kept in `?tab=`.
 */
import { html, nothing } from "lit";
import { session } from "../session.ts";
import { setQuery } from "../router.ts";
import { PageElement } from "../components/page.ts";
import "../components/settings_users.ts";
import "../components/settings_roles.ts";
import "../components/settings_user_groups.ts";
import "../components/settings_role_bindings.ts";
import "../components/settings_agent.ts";
import "../components/flatpak_repos.ts";
import "../components/settings_api_tokens.ts";
import "../components/mfa_settings.ts";
import "../components/mfa_policy_settings.ts";

/** Tabs; a tab shows when the person holds one of `anyOf` (none listed: everyone) and every one of `allOf`. */
const TABS: ReadonlyArray<{ name: string; label: string; anyOf: string[]; allOf?: string[]; tag: string }> = [
  { name: "users", label: "Users", anyOf: ["user:view"], tag: "svc-settings-users" },
  { name: "roles", label: "Roles", anyOf: ["role:view"], tag: "svc-settings-roles" },
  { name: "user-groups", label: "User groups", anyOf: ["user_group:view"], tag: "svc-settings-user-groups" },
  {
    name: "role-bindings",
    label: "Role bindings",
    // The list shows user bindings with user:view and user-group bindings with user_group:view.
    anyOf: ["user:view", "user_group:view"],
    allOf: ["role:view"],
    tag: "svc-settings-role-bindings",
  },
  { name: "agent", label: "Agent notifications", anyOf: ["settings:view"], tag: "svc-settings-agent" },
  { name: "api-tokens", label: "API tokens", anyOf: [], tag: "svc-settings-api-tokens" },
  { name: "second-factors", label: "Second factors", anyOf: [], tag: "svc-mfa-settings" },
  {
    name: "flatpak",
    label: "Flatpak repositories",
    anyOf: ["settings:view"],
    tag: "svc-settings-flatpak-repos",
  },
];

class SvcSettingsPage extends PageElement {
  override pageTitle = "Settings";

  override render() {
    const tabs = TABS.filter((t) =>
      (t.anyOf.length === 0 || session.canAny(...t.anyOf)) && (t.allOf ?? []).every((p) => session.can(p))
    );
    const requested = this.route?.query.get("tab");
    const active = tabs.find((t) => t.name === requested)?.name ?? tabs[0]?.name;
    return html`
      ${this.renderHeader(
        nothing,
        "Who may use the console, with which permissions, and what agents tell users.",
      )}
      <sl-tab-group no-scroll-controls @sl-tab-show=${(e: CustomEvent<{ name: string }>) =>
        setQuery({ tab: e.detail.name })}>
        ${tabs.map((t) =>
          html`<sl-tab slot="nav" panel=${t.name} ?active=${t.name === active}>${t.label}</sl-tab>`
        )}
        ${tabs.map((t) =>
          html`<sl-tab-panel name=${t.name} ?active=${t.name === active}>${
            t.tag === "svc-settings-users"
              ? html`<svc-settings-users></svc-settings-users>`
              : t.tag === "svc-settings-roles"
              ? html`<svc-settings-roles></svc-settings-roles>`
              : t.tag === "svc-settings-user-groups"
              ? html`<svc-settings-user-groups></svc-settings-user-groups>`
              : t.tag === "svc-settings-role-bindings"
              ? html`<svc-settings-role-bindings></svc-settings-role-bindings>`
              : t.tag === "svc-settings-api-tokens"
              ? html`<svc-settings-api-tokens></svc-settings-api-tokens>`
              : t.tag === "svc-mfa-settings"
              ? html`<svc-mfa-settings></svc-mfa-settings>${
                session.can("settings:view")
                  ? html`<svc-mfa-policy-settings></svc-mfa-policy-settings>`
                  : nothing
              }`
              : t.tag === "svc-settings-flatpak-repos"
              ? html`<svc-settings-flatpak-repos></svc-settings-flatpak-repos>`
              : html`<svc-settings-agent></svc-settings-agent>`
          }</sl-tab-panel>`
        )}
      </sl-tab-group>
    `;
  }
}

customElements.define("svc-settings-page", SvcSettingsPage);
