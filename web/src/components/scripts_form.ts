/**
 * `<svc-scripts-form>`, the Scripts policy editor's form (see `editors/scripts.ts`): a warning that scripts are
 * powerful, then per script its name, when it runs, the interpreter, the timeout, a "run again" action and the script
 * in a highlighting editor (a transparent textarea over the coloured text, `shell_highlight.ts`; no editor library).
 * The server checks every script with `bash -n`/`sh -n` when the policy is saved, naming the line; it signs the
 * scripts when the policy is released, and nodes run only what it signed.
 */
import { html, nothing } from "lit";
import {
  ScriptInterpreterSchema,
  ScriptTriggerSchema,
} from "../../../shared/gen/svc/policy/v1/scripts_pb.ts";
import {
  DEFAULT_SCRIPT_TIMEOUT_SECONDS,
  MAX_SCRIPT_TIMEOUT_SECONDS,
} from "../../../shared/policy_types/scripts.ts";
import type { JsonObject, JsonValue } from "../content.ts";
import { shellTokens } from "../shell_highlight.ts";
import { valueOf } from "./ui.ts";
import { PolicyFormElement } from "./policy_form_element.ts";

const TRIGGERS: [string, string][] = [
  ["SCRIPT_TRIGGER_MACHINE_STARTUP", "Machine startup (root)"],
  ["SCRIPT_TRIGGER_MACHINE_SHUTDOWN", "Machine shutdown (root)"],
  ["SCRIPT_TRIGGER_USER_LOGIN", "User login (as the user)"],
  ["SCRIPT_TRIGGER_USER_LOGOUT", "User logout (as the user)"],
];
const INTERPRETERS: [string, string][] = [
  ["SCRIPT_INTERPRETER_BASH", "bash"],
  ["SCRIPT_INTERPRETER_SH", "sh (POSIX)"],
];

/** The warning above every Scripts form. */
export const SCRIPTS_WARNING =
  "Scripts are powerful: machine scripts run as root, and login scripts as every user, on every node this policy " +
  "reaches. Only people with the permission to create and edit Scripts policies can change them; the server checks " +
  "their syntax when you save and signs them when the policy is released, and nodes run only what it signed, once " +
  "per version.";

/** An enum value as its name, whether the JSON holds the name or the number. */
function enumName(
  value: JsonValue | undefined,
  schema: typeof ScriptTriggerSchema | typeof ScriptInterpreterSchema,
) {
  if (typeof value === "number") return schema.values.find((v) => v.number === value)?.name ?? String(value);
  return typeof value === "string" ? value : "";
}

/** A field of a script in either spelling protojson accepts. */
function field(script: JsonObject, camel: string, snake: string): JsonValue | undefined {
  return script[camel] ?? script[snake];
}

class SvcScriptsForm extends PolicyFormElement {
  /** Sets one field of script `index` (JSON name `camel`; the snake_case spelling goes). */
  #set(index: number, camel: string, snake: string, value: JsonValue | undefined): void {
    const scripts = [...this.listOf("scripts")];
    const script = { ...scripts[index] };
    delete script[snake];
    if (value === undefined || value === "" || value === 0) delete script[camel];
    else script[camel] = value;
    scripts[index] = script;
    this.emitList("scripts", scripts);
  }

  #add(): void {
    const taken = new Set(this.listOf("scripts").map((s) => String(s.name ?? "")));
    let n = this.listOf("scripts").length + 1;
    while (taken.has(`script-${n}`)) n++;
    this.emitList("scripts", [...this.listOf("scripts"), {
      name: `script-${n}`,
      trigger: "SCRIPT_TRIGGER_MACHINE_STARTUP",
      body: "#!/bin/bash\nset -eu\n",
    }]);
  }

  #remove(index: number): void {
    this.emitList("scripts", this.listOf("scripts").filter((_, i) => i !== index));
  }

  #editor(index: number, script: JsonObject) {
    const body = String(script.body ?? "");
    const problem = this.issueText(`scripts[${index}].body`);
    // The textarea and the coloured text under it share font, size and padding; the textarea's text is transparent.
    return html`
      <div class="script-editor ${problem ? "has-error" : ""}">
        <pre class="script-highlight" aria-hidden="true"><code>${shellTokens(body).map((t) =>
          t.kind === "text" ? t.text : html`<span class="sh-${t.kind}">${t.text}</span>`
        )}${body.endsWith("\n") ? " " : ""}</code></pre>
        <textarea class="script-body" spellcheck="false" autocapitalize="off" autocomplete="off" wrap="off"
          aria-label=${`Script ${String(script.name ?? index + 1)}`} ?readonly=${this.readOnly} .value=${body}
          @scroll=${(e: Event) => {
            const area = e.target as HTMLTextAreaElement;
            const pre = area.previousElementSibling as HTMLElement;
            pre.scrollTop = area.scrollTop;
            pre.scrollLeft = area.scrollLeft;
          }}
          @keydown=${(e: KeyboardEvent) => {
            if (e.key !== "Tab" || e.shiftKey || this.readOnly) return;
            e.preventDefault();
            const area = e.target as HTMLTextAreaElement;
            area.setRangeText("  ", area.selectionStart, area.selectionEnd, "end");
            this.#set(index, "body", "body", area.value);
          }}
          @input=${(e: Event) =>
            this.#set(index, "body", "body", (e.target as HTMLTextAreaElement).value)}></textarea>
      </div>
      ${problem ? html`<p class="field-error script-body-error">${problem}</p>` : nothing}
    `;
  }

  #script(script: JsonObject, index: number) {
    const runAgain = Number(field(script, "runAgain", "run_again") ?? 0);
    const timeout = Number(field(script, "timeoutSeconds", "timeout_seconds") ?? 0);
    const help = (path: string, text: string) => this.issueText(`scripts[${index}].${path}`) || text;
    const bad = (path: string) => this.issueText(`scripts[${index}].${path}`) ? "has-error" : "";
    return html`
      <section class="card script-card" data-index=${String(index)} aria-label=${`Script ${index + 1}`}>
        <div class="form-grid script-fields">
          <sl-input class="script-name ${bad("name")}" label="Name" required .value=${String(
            script.name ?? "",
          )}
            ?disabled=${this.readOnly} help-text=${help(
              "name",
              "Unique in the policy; names its systemd unit.",
            )}
            @sl-input=${(e: Event) => this.#set(index, "name", "name", valueOf(e))}></sl-input>
          <sl-select class="script-trigger ${bad("trigger")}" label="Runs at" hoist ?disabled=${this.readOnly}
            .value=${enumName(script.trigger, ScriptTriggerSchema)}
            help-text=${help("trigger", "Once per version: on every node, or once for every user.")}
            @sl-change=${(e: Event) => this.#set(index, "trigger", "trigger", valueOf(e))}>
            ${TRIGGERS.map(([v, label]) => html`<sl-option value=${v}>${label}</sl-option>`)}
          </sl-select>
          <sl-select class="script-interpreter" label="Interpreter" hoist ?disabled=${this.readOnly}
            .value=${enumName(script.interpreter, ScriptInterpreterSchema) || "SCRIPT_INTERPRETER_BASH"}
            @sl-change=${(e: Event) => this.#set(index, "interpreter", "interpreter", valueOf(e))}>
            ${INTERPRETERS.map(([v, label]) => html`<sl-option value=${v}>${label}</sl-option>`)}
          </sl-select>
          <sl-input class="script-timeout ${bad("timeout_seconds")}" type="number" min="0"
            max=${String(MAX_SCRIPT_TIMEOUT_SECONDS)} label="Timeout (seconds)" ?disabled=${this.readOnly}
            .value=${timeout ? String(timeout) : ""} placeholder=${String(DEFAULT_SCRIPT_TIMEOUT_SECONDS)}
            help-text=${help(
              "timeout_seconds",
              `systemd stops the script after this; empty means ${DEFAULT_SCRIPT_TIMEOUT_SECONDS}.`,
            )}
            @sl-input=${(e: Event) =>
              this.#set(index, "timeoutSeconds", "timeout_seconds", Number(valueOf(e)) || 0)}>
          </sl-input>
        </div>
        ${this.#editor(index, script)}
        <div class="script-actions">
          <span class="muted script-run-again">${runAgain
            ? `Asked to run again ${runAgain} time${runAgain === 1 ? "" : "s"}.`
            : "Runs once per version."}</span>
          ${this.readOnly ? nothing : html`
            <sl-button size="small" class="script-run-again-button"
              @click=${() => this.#set(index, "runAgain", "run_again", runAgain + 1)}>
              Run again on every node</sl-button>
            <sl-button size="small" variant="danger" outline class="script-remove"
              @click=${() => this.#remove(index)}>Remove script</sl-button>
          `}
        </div>
      </section>
    `;
  }

  override render() {
    const scripts = this.listOf("scripts");
    return html`
      <style>
        svc-scripts-form .script-editor { position: relative; font-family: var(--sl-font-mono); font-size: 0.875rem;
          line-height: 1.5; border: 1px solid var(--sl-color-neutral-300); border-radius: var(--sl-border-radius-medium);
          min-height: 12rem; margin: 0.75rem 0 0.25rem; }
        svc-scripts-form .script-editor.has-error { border-color: var(--sl-color-danger-600); }
        svc-scripts-form .script-highlight, svc-scripts-form .script-body { margin: 0; padding: 0.5rem 0.75rem;
          font: inherit; line-height: inherit; white-space: pre; tab-size: 2; overflow: auto; box-sizing: border-box;
          position: absolute; inset: 0; border: 0; }
        svc-scripts-form .script-highlight { pointer-events: none; color: var(--sl-color-neutral-900); }
        svc-scripts-form .script-body { background: transparent; color: transparent; resize: vertical;
          caret-color: var(--sl-color-neutral-900); width: 100%; height: 100%; outline: none; }
        svc-scripts-form .script-body:focus-visible { box-shadow: 0 0 0 2px var(--sl-color-primary-500); }
        svc-scripts-form .sh-comment { color: var(--sl-color-neutral-600); font-style: italic; }
        svc-scripts-form .sh-string { color: var(--sl-color-success-700); }
        svc-scripts-form .sh-variable { color: var(--sl-color-primary-700); }
        svc-scripts-form .sh-keyword { color: var(--sl-color-purple-700); font-weight: 600; }
        svc-scripts-form .sh-operator { color: var(--sl-color-warning-800); }
        svc-scripts-form .script-actions { display: flex; gap: 0.5rem; align-items: center; flex-wrap: wrap; }
      </style>
      <sl-alert variant="warning" open class="scripts-warning">
        <sl-icon slot="icon" name="exclamation-triangle"></sl-icon>${SCRIPTS_WARNING}
      </sl-alert>
      ${scripts.length === 0 ? html`<p class="muted scripts-empty">No script yet.</p>` : nothing}
      ${scripts.map((s, i) => this.#script(s, i))}
      ${this.readOnly ? nothing : html`
        <sl-button class="script-add" @click=${() => this.#add()}>
          <sl-icon slot="prefix" name="plus-lg"></sl-icon>Add a script</sl-button>
      `}
    `;
  }
}

customElements.define("svc-scripts-form", SvcScriptsForm);
