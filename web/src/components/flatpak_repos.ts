/**
 * `<svc-settings-flatpak-repos>`: the Flatpak catalogue's repositories with their refresh state (last
 * attempt, last success, last error, applications indexed). Administrators register a repository by URL
 * (an OSTree repository or an appstream.xml(.gz) file), by a `.flatpakrepo` file or URL, or as an upload
 * repository filled with an AppStream file (air-gapped sites; a .gz file is inflated in the browser), and
 * can refresh or delete it. The policy editor searches what is indexed here.
 */
import { html, nothing } from "lit";
import { type Answer, api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "./page.ts";
import { bodyRows } from "./table_cards.ts";
import "./file_picker.ts";
import { confirmAction, errorAlert, fieldError, formatDate, notify, relativeTime, valueOf } from "./ui.ts";

/** `GET /api/v1/flatpak/repos` item. */
type FlatpakRepo = Answer<"GET /api/v1/flatpak/repos">["items"][number];

class SvcSettingsFlatpakRepos extends PageElement {
  static override properties = {
    ...PageElement.properties,
    repos: { state: true },
    draft: { state: true },
    saveError: { state: true },
    busy: { state: true },
  };
  declare repos: FlatpakRepo[] | undefined;
  declare draft: { name: string; kind: "url" | "flatpakrepo" | "upload"; url: string; flatpakrepo: string };
  declare saveError: unknown;
  declare busy: string;

  constructor() {
    super();
    this.draft = { name: "", kind: "url", url: "", flatpakrepo: "" };
    this.busy = "";
  }

  protected override async load(): Promise<void> {
    this.repos = (await api.call("GET /api/v1/flatpak/repos")).items;
  }

  async #add(e: Event): Promise<void> {
    e.preventDefault();
    const d = this.draft;
    try {
      const created = await api.call("POST /api/v1/flatpak/repos", {
        body: {
          name: d.name,
          ...(d.kind === "url"
            ? { url: d.url }
            : d.kind === "flatpakrepo"
            ? { flatpakrepo: d.flatpakrepo }
            : {}),
          ...(d.kind === "upload" ? { upload: true } : {}),
        },
      });
      this.saveError = undefined;
      this.draft = { name: "", kind: d.kind, url: "", flatpakrepo: "" };
      notify(
        `Repository ${created.name} registered${created.source === "url" ? "; refresh it to index it" : ""}.`,
        "success",
      );
      await this.reload();
    } catch (err) {
      this.saveError = err;
    }
  }

  async #refresh(repo: FlatpakRepo): Promise<void> {
    this.busy = repo.id;
    try {
      const result = await api.call("POST /api/v1/flatpak/repos/{id}/refresh", { path: { id: repo.id } });
      notify(
        result.outcome === "error"
          ? `Refresh of ${repo.name} failed: ${result.error}`
          : `${repo.name}: ${result.outcome}`,
        result.outcome === "error" ? "danger" : "success",
      );
      await this.reload();
    } finally {
      this.busy = "";
    }
  }

  async #upload(repo: FlatpakRepo, e: Event): Promise<void> {
    const input = e.target as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    this.busy = repo.id;
    try {
      const gz = new Uint8Array(await file.slice(0, 2).arrayBuffer());
      const text = gz[0] === 0x1f && gz[1] === 0x8b
        ? await new Response(file.stream().pipeThrough(new DecompressionStream("gzip"))).text()
        : await file.text();
      await api.call("POST /api/v1/flatpak/repos/{id}/appstream", {
        path: { id: repo.id },
        body: text,
        contentType: "application/xml",
      });
      notify(`AppStream of ${repo.name} indexed.`, "success");
      await this.reload();
    } catch (err) {
      notify(`Upload failed: ${(err as Error).message}`, "danger");
    } finally {
      this.busy = "";
      (input.closest("svc-file-picker") as { reset(): void } | null)?.reset();
    }
  }

  async #delete(repo: FlatpakRepo): Promise<void> {
    const ok = await confirmAction({
      title: `Delete ${repo.name}?`,
      message: "Its indexed applications leave the catalogue search. Policies are not changed.",
      confirmLabel: "Delete",
      danger: true,
    });
    if (!ok) return;
    await api.call("DELETE /api/v1/flatpak/repos/{id}", { path: { id: repo.id } });
    await this.reload();
  }

  #state(repo: FlatpakRepo) {
    if (repo.last_error) {
      return html`<sl-badge variant="danger" pill>error</sl-badge> <span class="repo-error">${repo.last_error}</span>`;
    }
    if (repo.last_success_at) {
      return html`
        <sl-badge variant="success" pill>indexed</sl-badge>
        <span title=${formatDate(repo.last_success_at)}>${relativeTime(repo.last_success_at)}</span>
      `;
    }
    return html`<sl-badge variant="neutral" pill>never indexed</sl-badge>`;
  }

  override render() {
    if (!this.repos) {
      return html`${this.renderLoadError()}${this.loadError ? nothing : html`<sl-spinner></sl-spinner>`}`;
    }
    const canEdit = session.can("settings:edit");
    const d = this.draft;
    return html`
      <table class="data-table flatpak-repos">
        <caption>Flatpak repositories of the catalogue</caption>
        <thead>
          <tr><th scope="col">Name</th><th scope="col">Source</th><th scope="col">Applications</th>
          <th scope="col">Refresh state</th>${canEdit
            ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>`
            : nothing}</tr>
        </thead>
        <tbody>
          ${bodyRows(this.repos, { columns: 5, empty: "No repository yet." }, (repo) =>
            html`
              <tr data-repo=${repo.name}>
                <th scope="row">${repo.name}${repo.title
                  ? html`<div class="muted">${repo.title}</div>`
                  : nothing}</th>
                <td>${repo.source === "upload" ? "AppStream upload" : html`<code>${repo.url}</code>`}</td>
                <td class="app-count">${repo.app_count}</td>
                <td class="repo-state">${this.#state(repo)}</td>
                ${canEdit
                  ? html`<td class="actions">
                  ${
                    repo.source === "url"
                      ? html`
                        <sl-button size="small" ?loading=${this.busy === repo.id}
                          @click=${() => this.#refresh(repo)}>Refresh<span class="visually-hidden"> ${repo
                            .name}</span></sl-button>
                      `
                      : html`
                        <svc-file-picker class="upload" button-label="Upload AppStream…"
                          accept=".xml,.gz,application/xml,application/gzip"
                          accessible-name=${`Upload AppStream of ${repo.name}`} @change=${(e: Event) =>
                            this.#upload(repo, e)}></svc-file-picker>
                      `
                  }
                  <sl-button size="small" variant="danger" outline @click=${() =>
                    this.#delete(repo)}>Delete<span
                    class="visually-hidden"> ${repo.name}</span></sl-button>
                </td>`
                  : nothing}
              </tr>
            `)}
        </tbody>
      </table>
      ${canEdit
        ? html`
          <form class="card form-grid flatpak-repo-form" @submit=${this.#add}>
            <h2>Register a repository</h2>
            ${errorAlert(this.saveError)}
            <sl-input name="name" label="Name" required .value=${d
              .name} help-text=${fieldError(this.saveError, "name") ||
              "Usually the remote name nodes use, e.g. flathub."}
              @sl-input=${(e: Event) => this.draft = { ...d, name: valueOf(e) }}></sl-input>
            <sl-radio-group label="Source" .value=${d.kind}
              @sl-change=${(e: Event) => this.draft = { ...d, kind: valueOf(e) as typeof d.kind }}>
              <sl-radio-button value="url">Repository or AppStream URL</sl-radio-button>
              <sl-radio-button value="flatpakrepo">.flatpakrepo file</sl-radio-button>
              <sl-radio-button value="upload">AppStream upload (air-gapped)</sl-radio-button>
            </sl-radio-group>
            ${d.kind === "url"
              ? html`
                <sl-input name="url" label="URL" .value=${d.url}
                  help-text=${fieldError(this.saveError, "url") ||
                    "e.g. https://dl.flathub.org/repo/ or a .flatpakrepo URL"}
                  @sl-input=${(e: Event) => this.draft = { ...d, url: valueOf(e) }}></sl-input>
              `
              : d.kind === "flatpakrepo"
              ? html`
                <sl-textarea name="flatpakrepo" label=".flatpakrepo content" rows="5"
                  .value=${d.flatpakrepo} @sl-input=${(e: Event) =>
                    this.draft = { ...d, flatpakrepo: valueOf(e) }}></sl-textarea>
              `
              : nothing}
            <div class="form-actions"><sl-button type="submit" variant="primary">Register</sl-button></div>
          </form>
        `
        : html`<p class="muted">Registering repositories needs the settings:edit permission.</p>`}
    `;
  }
}

customElements.define("svc-settings-flatpak-repos", SvcSettingsFlatpakRepos);
