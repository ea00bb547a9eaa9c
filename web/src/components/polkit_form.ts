/**
 * `<svc-polkit-form>`, the Polkit policy editor's form (see `editors/polkit.ts`): the form generated from the
 * content message, an action picker above it and a preview of the generated rules file below it.
 *
 * The picker searches the server's merged polkit catalogue (`GET /api/v1/catalogues/polkit`): each hit shows
 * the action id, its description and its implicit defaults (what polkit answers without a rule, for any,
 * inactive and active sessions); "Add" puts the id into the chosen rule (a new rule when there is none), and
 * the prefixes the hits share can be added as action prefixes. The preview is the agent's own renderer
 * (`shared/polkit_js.ts`), so it shows byte for byte what lands in `/etc/polkit-1/rules.d/`.
 */
import { html, nothing } from "lit";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { PolkitPolicySchema } from "../../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { renderPolkitRules } from "../../../shared/polkit_js.ts";
import { api } from "../api.ts";
import type { JsonObject } from "../content.ts";
import { valueOf } from "./ui.ts";
import "../editors/schema_form.ts";
import { PolicyFormElement } from "./policy_form_element.ts";
import { addButton, catalogueSearch } from "./catalogue_picker.ts";
import { stateProperties } from "./light_element.ts";

/** One catalogue hit (`GET /api/v1/catalogues/polkit`). */
export interface PolkitCatalogueAction {
  action_id: string;
  description: string;
  vendor: string;
  default_any: string;
  default_inactive: string;
  default_active: string;
  node_count: number;
  builtin: boolean;
}

/** The priority rule, stated once for the editor (the README says the same). */
export const POLKIT_PRIORITY_RULE =
  "Each policy becomes its own rules file. polkit reads the files in name order and the first rule that " +
  "answers decides; svc names them so that the policy bound with the higher priority is read first, so a " +
  "higher binding priority wins, as for every other policy type.";

function implicit(value: string): string {
  return value === "" ? "not stated" : value.replaceAll("_", " ");
}

class SvcPolkitForm extends PolicyFormElement {
  static override properties = {
    ...stateProperties("query", "hits", "prefixes", "target", "searchError"),
  };
  declare query: string;
  declare hits: PolkitCatalogueAction[] | undefined;
  declare prefixes: { prefix: string; action_count: number }[];
  /** Index of the rule "Add" puts ids into. */
  declare target: number;
  declare searchError: unknown;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor() {
    super();
    this.query = "";
    this.prefixes = [];
    this.target = 0;
  }

  #search(text: string): void {
    this.query = text;
    clearTimeout(this.#timer);
    if (text.trim().length < 2) {
      this.hits = undefined;
      this.prefixes = [];
      return;
    }
    this.#timer = setTimeout(async () => {
      try {
        const found = await api.call("GET /api/v1/catalogues/polkit", {
          query: { q: text.trim(), limit: 20 },
        });
        this.hits = found.items;
        this.prefixes = found.prefixes.slice(0, 5);
        this.searchError = undefined;
      } catch (err) {
        this.searchError = err;
      }
    }, 250);
  }

  #list(rule: JsonObject | undefined, field: "action_ids" | "action_prefixes"): string[] {
    const camel = field === "action_ids" ? "actionIds" : "actionPrefixes";
    const list = rule?.[field] ?? rule?.[camel];
    return Array.isArray(list) ? list as string[] : [];
  }

  #has(field: "action_ids" | "action_prefixes", id: string): boolean {
    return this.#list(this.listOf("rules")[this.target], field).includes(id);
  }

  #add(field: "action_ids" | "action_prefixes", id: string): void {
    const rules = [...this.listOf("rules")];
    if (rules.length === 0) {
      rules.push({
        name: id.split(".").filter((p) => p).slice(-1)[0] ?? "rule",
        result: "POLKIT_RESULT_AUTH_ADMIN",
      });
      this.target = 0;
    }
    const index = Math.min(this.target, rules.length - 1);
    const rule = { ...rules[index] };
    // The generated form keys fields by their JSON names (actionIds); protojson reads both spellings.
    const camel = field === "action_ids" ? "actionIds" : "actionPrefixes";
    const list = this.#list(rule, field);
    delete rule[field];
    rule[camel] = [...list, id];
    rules[index] = rule;
    this.emitValue({ ...this.value, rules });
  }

  #preview(): { text?: string; problem?: string } {
    try {
      const message = fromJson(PolkitPolicySchema, this.value as JsonValue, { ignoreUnknownFields: true });
      if (message.rules.length === 0) return { problem: "Add a rule to see the generated file." };
      return { text: renderPolkitRules(message, { policyId: "(this policy)", policyName: "(this policy)" }) };
    } catch (err) {
      return { problem: `Complete the rules to see the generated file (${(err as Error).message}).` };
    }
  }

  override render() {
    const rules = this.listOf("rules");
    const preview = this.#preview();
    return html`
      <p class="muted polkit-priority">${POLKIT_PRIORITY_RULE}</p>
      ${this.readOnly ? nothing : catalogueSearch({
        name: "polkit",
        region: "Polkit action catalogue",
        label: "Find a polkit action",
        placeholder: "Id or description, e.g. reboot or udisks2",
        helpText: "Actions reported by your nodes, and the ones svc ships with.",
        query: this.query,
        hits: this.hits,
        error: this.searchError,
        noun: "action",
        onSearch: (text) => this.#search(text),
        controls: rules.length > 1
          ? html`
            <sl-select class="polkit-target" label="Add to rule" .value=${String(this.target)}
              @sl-change=${(e: Event) => this.target = Number(valueOf(e))}>
              ${rules.map((r, i) =>
                html`<sl-option value=${String(i)}>${i + 1}. ${
                  String(r.name ?? "") || "(unnamed)"
                }</sl-option>`
              )}
            </sl-select>
          `
          : nothing,
        hit: (hit: PolkitCatalogueAction) =>
          html`
            <li class="polkit-hit" data-action-id=${hit.action_id}>
              <span class="polkit-hit-text">
                <code>${hit.action_id}</code> ${hit.description}
                <span class="muted polkit-defaults">
                  Without a rule: any session ${implicit(hit.default_any)}, inactive
                  ${implicit(hit.default_inactive)}, active ${implicit(hit.default_active)}${hit.node_count
                    ? ` · on ${hit.node_count} node(s)`
                    : ""}
                </span>
              </span>
              ${addButton(
                this.#has("action_ids", hit.action_id),
                hit.action_id,
                () => this.#add("action_ids", hit.action_id),
              )}
            </li>
          `,
        more: this.prefixes.length
          ? html`
            <p class="polkit-prefixes">Or every action under a prefix:
              ${this.prefixes.map((p) =>
                html`
                  <sl-button size="small" class="polkit-prefix" data-prefix=${p.prefix}
                    ?disabled=${this.#has("action_prefixes", p.prefix)}
                    @click=${() => this.#add("action_prefixes", p.prefix)}>${p.prefix}* (${p
                      .action_count})</sl-button>
                `
              )}
            </p>
          `
          : nothing,
      })}
      ${this.schemaForm(PolkitPolicySchema)}
      <section class="card polkit-preview-card" aria-label="Generated rules file">
        <h3>Generated rules file</h3>
        ${preview.text !== undefined
          ? html`<pre class="polkit-preview"><code>${preview.text}</code></pre>`
          : html`<p class="muted polkit-preview-problem">${preview.problem}</p>`}
      </section>
    `;
  }
}

customElements.define("svc-polkit-form", SvcPolkitForm);
