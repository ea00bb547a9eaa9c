/**
 * `<svc-deploy-agent>`: the "Deploy agent" button and wizard (masthead and nodes page). Needs `node:view`.
 * When the server has no agent repository (the svc-agent-repo package is not installed) the wizard says
 * so and how to install it, instead of offering a script that could not work. The admin picks the distribution family
 * and arch and gets a copy-paste script (`deploy_script.ts`) built from this server's origin, its CA and
 * repository key; with `node_group:view` + `node_group:create` an optional enrollment step creates a fresh
 * token for a chosen node group. A second tab lists every file of the repository's manifest for direct
 * download. A served agent version that differs from the server's is shown as a warning.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing, type TemplateResult } from "lit";
import { type Answer, api } from "../api.ts";
import { session } from "../session.ts";
import { errorText } from "./page.ts";
import { whenHidden } from "./ui.ts";
import { deployScript, FAMILIES, type Family } from "../deploy_script.ts";

/** `GET /api/v1/agent-repo`. */
type RepoStatus = Answer<"GET /api/v1/agent-repo">;

/**
 * `GET /agent-repo`, asked once per page load and shared by every `<svc-deploy-agent>` (the masthead's and
 * the nodes page's, which is created again on each visit). A failed answer is forgotten, so a later element
 * asks again.
 */
let repoStatus: Promise<RepoStatus | undefined> | undefined;

function loadRepoStatus(): Promise<RepoStatus | undefined> {
  repoStatus ??= api.call("GET /api/v1/agent-repo").catch(() => {
    repoStatus = undefined;
    return undefined;
  });
  return repoStatus;
}

function sizeText(bytes: number): string {
  if (bytes >= 1 << 20) return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
  if (bytes >= 1 << 10) return `${(bytes / (1 << 10)).toFixed(1)} KiB`;
  return `${bytes} B`;
}

class SvcDeployAgent extends LightElement {
  static override properties = {
    ...stateProperties(
      "status",
      "open",
      "family",
      "arch",
      "enroll",
      "groups",
      "groupId",
      "token",
      "material",
      "error",
      "busy",
    ),
  };
  declare status: RepoStatus | undefined;
  declare open: boolean;
  declare family: Family;
  declare arch: "amd64" | "arm64";
  declare enroll: boolean;
  declare groups: Array<{ id: string; name: string }>;
  declare groupId: string;
  declare token: string;
  declare material: { caPem: string; repoKey: string } | undefined;
  declare error: unknown;
  declare busy: boolean;

  constructor() {
    super();
    this.status = undefined;
    this.open = false;
    this.family = "debian";
    this.arch = "amd64";
    this.enroll = false;
    this.groups = [];
    this.groupId = "";
    this.token = "";
    this.material = undefined;
    this.error = undefined;
    this.busy = false;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    if (session.can("node:view")) {
      void loadRepoStatus().then((s) => this.status = s);
    }
  }

  get #mayEnroll(): boolean {
    return session.can("node_group:view") && session.can("node_group:create");
  }

  async #openWizard(): Promise<void> {
    this.open = true;
    this.error = undefined;
    if (!this.status?.enabled) return;
    try {
      if (!this.material) {
        const [ca, key] = await Promise.all(["/agent/ca.crt", "/agent/repo-key.asc"].map(async (path) => {
          const res = await fetch(path);
          if (!res.ok) throw new Error(`${path} answered ${res.status}`);
          return await res.text();
        }));
        this.material = { caPem: ca, repoKey: key };
      }
      if (this.#mayEnroll && this.groups.length === 0) {
        const page = await api.call("GET /api/v1/node-groups", { query: { per_page: 100 } });
        this.groups = page.items;
        this.groupId ||= page.items[0]?.id ?? "";
      }
    } catch (err) {
      this.error = err;
    }
  }

  async #createToken(): Promise<void> {
    this.busy = true;
    this.error = undefined;
    try {
      const res = await api.call("POST /api/v1/node-groups/{id}/tokens", { path: { id: this.groupId } });
      this.token = res.token;
    } catch (err) {
      this.error = err;
    } finally {
      this.busy = false;
    }
  }

  #script(): string {
    const s = this.status!;
    return deployScript({
      origin: location.origin,
      family: this.family,
      arch: this.arch,
      caPem: this.material!.caPem,
      repoKey: this.material!.repoKey,
      packages: s.packages,
      enrollment: this.enroll && this.token ? { token: this.token, policyPort: s.policy_port } : undefined,
    });
  }

  override render() {
    const s = this.status;
    if (!s) return nothing;
    return html`
      <sl-button size="small" class="deploy-agent-button" @click=${() => this.#openWizard()}>
        <sl-icon slot="prefix" name="download"></sl-icon>Deploy agent
      </sl-button>
      ${this.open ? (s.enabled ? this.#renderDialog(s) : this.#renderMissing(s)) : nothing}
    `;
  }

  #renderMissing(s: RepoStatus): TemplateResult {
    return html`
      <sl-dialog open label="Deploy agent" style="--width: 40rem" @sl-after-hide=${whenHidden(() =>
        this.open = false
      )}>
        <sl-alert variant="warning" open class="agent-repo-missing">
          <sl-icon slot="icon" name="exclamation-triangle"></sl-icon>
          <strong>No agent repository is installed on this server</strong>, so there are no agent packages to
          deploy. Install the <code>svc-agent-repo</code> package of this server's release on the server host
          (<code>apt install svc-agent-repo</code> or <code>dnf install svc-agent-repo</code>); the server serves it
          from <code>/usr/share/svc/agent-repo</code> without a restart.
        </sl-alert>
        ${s.reason ? html`<p class="hint">Server: ${s.reason}</p>` : nothing}
      </sl-dialog>
    `;
  }

  #renderDialog(s: RepoStatus): TemplateResult {
    return html`
      <sl-dialog open label="Deploy agent" style="--width: 56rem" @sl-after-hide=${whenHidden(() =>
        this.open = false
      )}>
        ${s.version_mismatch
          ? html`<sl-alert variant="warning" open class="agent-version-mismatch">
            <sl-icon slot="icon" name="exclamation-triangle"></sl-icon>
            The repository serves agent ${s.version ?? "(unknown)"}, but this server is ${s.server_version}.
            Install the agent repository of this server's release (the svc-agent-repo package).
          </sl-alert>`
          : nothing}
        ${s.build_local_key
          ? html`<p class="hint">This repository is signed with a key generated by one build, not a release key.</p>`
          : nothing}
        ${this.error ? html`<sl-alert variant="danger" open>${errorText(this.error)}</sl-alert>` : nothing}
        <sl-tab-group>
          <sl-tab slot="nav" panel="script">Install script</sl-tab>
          <sl-tab slot="nav" panel="files">Downloads</sl-tab>
          <sl-tab-panel name="script">${this.#renderScriptTab(s)}</sl-tab-panel>
          <sl-tab-panel name="files">${this.#renderFiles(s)}</sl-tab-panel>
        </sl-tab-group>
      </sl-dialog>
    `;
  }

  #renderScriptTab(s: RepoStatus): TemplateResult {
    return html`
      <div class="toolbar">
        <sl-select label="Distribution" value=${this.family} @sl-change=${(e: Event) =>
          this.family = (e.target as HTMLSelectElement).value as Family}>
          ${FAMILIES.map((f) => html`<sl-option value=${f.id}>${f.label}</sl-option>`)}
        </sl-select>
        <sl-radio-group label="Architecture" value=${this.arch} @sl-change=${(e: Event) =>
          this.arch = (e.target as HTMLInputElement).value as "amd64" | "arm64"}>
          ${s.arches.map((a) => html`<sl-radio-button value=${a}>${a}</sl-radio-button>`)}
        </sl-radio-group>
      </div>
      ${this.#mayEnroll
        ? html`
          <sl-checkbox ?checked=${this.enroll} @sl-change=${(e: Event) =>
            this.enroll = (e.target as HTMLInputElement).checked}>
            Enroll the machine (creates a one-time enrollment token)
          </sl-checkbox>
          ${this.enroll
            ? html`
              <div class="toolbar">
                <sl-select label="Node group" value=${this.groupId} @sl-change=${(e: Event) => {
                  this.groupId = (e.target as HTMLSelectElement).value;
                  this.token = "";
                }}>
                              ${this.groups.map((g) => html`<sl-option value=${g.id}>${g.name}</sl-option>`)}
                            </sl-select>
                <sl-button variant="primary" ?disabled=${!this.groupId || this.busy} ?loading=${this.busy}
                  @click=${() => this.#createToken()}>${this.token ? "New token" : "Create token"}</sl-button>
              </div>
                          ${this.groups.length === 0
                            ? html`<p class="hint">Create a node group first.</p>`
                            : nothing}
            `
            : nothing}
        `
        : nothing}
      ${this.material
        ? html`
          <div class="script-header">
            <span>Run as root on the machine:</span>
            <sl-copy-button from="deploy-agent-script" copy-label="Copy the script" success-label="Script copied">
              <sl-icon slot="copy-icon" name="copy" label="Copy the script"></sl-icon>
            </sl-copy-button>
          </div>
          <pre id="deploy-agent-script" class="deploy-script" tabindex="0">${this.#script()}</pre>
        `
        : html`<sl-spinner></sl-spinner>`}
    `;
  }

  #renderFiles(s: RepoStatus): TemplateResult {
    return html`
      <p>Agent ${s.version} · metadata ${s.signed ? "signed" : "NOT signed"} by
        <a href="/agent/repo-key.asc">repo-key.asc</a> · checksums in <a href="/agent/manifest.json">manifest.json</a></p>
      <table class="data-table deploy-files">
        <thead>
          <tr>
            <th scope="col">File</th>
            <th scope="col">Size</th>
            <th scope="col">SHA-256</th>
          </tr>
        </thead>
        <tbody>
          ${s.files.map((f) =>
            html`
              <tr>
                <td><a href=${`/agent/${f.path}`} download>${f.path}</a></td>
                <td>${sizeText(f.size)}</td>
                <td><code>${f.sha256}</code></td>
              </tr>
            `
          )}
        </tbody>
      </table>
    `;
  }
}

customElements.define("svc-deploy-agent", SvcDeployAgent);
