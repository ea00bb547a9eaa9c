/**
 * `/disk-encryption`: the LUKS volume inventory agents report, as far as the server offers it. Key escrow and
 * reveal come with the full disk-encryption feature; until the server has the inventory endpoint the page
 * says so instead of showing an error.
 */
import { html, nothing, type TemplateResult } from "lit";
import { api, ApiError, type ListPage } from "../api.ts";
import { PageElement } from "../components/page.ts";
import { relativeTime } from "../components/ui.ts";

/** A reported encrypted volume (fields beyond these are ignored). */
interface Volume {
  id: string;
  node_id: string;
  node_name?: string;
  device?: string;
  uuid?: string;
  mapper_name?: string;
  escrowed?: boolean;
  reported_at?: string | null;
}

class SvcDiskEncryptionPage extends PageElement {
  static override properties = {
    ...PageElement.properties,
    page: { state: true },
    unavailable: { state: true },
  };
  declare page: ListPage<Volume> | undefined;
  declare unavailable: boolean;

  override pageTitle = "Disk encryption";

  constructor() {
    super();
    this.unavailable = false;
  }

  protected override async load(): Promise<void> {
    try {
      this.page = await api.get<ListPage<Volume>>("/disk-encryption/volumes", { per_page: 100 });
      this.unavailable = false;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404 && err.code === "not_found") {
        this.unavailable = true;
        return;
      }
      throw err;
    }
  }

  override render() {
    return html`
      ${this.renderHeader(
        nothing,
        "Encrypted volumes reported by the agents, and whether a recovery key is escrowed.",
      )}
      ${this.renderLoadError()} ${this.#body()}
    `;
  }

  #body(): TemplateResult | typeof nothing {
    if (this.unavailable) {
      return html`
        <div class="empty-state" role="status">
          <p>This server does not collect a disk-encryption inventory yet.</p>
          <p>Once agents report their encrypted volumes, they are listed here with their key-escrow state.</p>
        </div>
      `;
    }
    const page = this.page;
    if (!page) return this.loadError ? nothing : html`<sl-spinner></sl-spinner>`;
    if (page.items.length === 0) {
      return html`
        <div class="empty-state" role="status">
          <p>No encrypted volumes have been reported yet.</p>
        </div>
      `;
    }
    return html`
      <div class="table-wrap">
        <table class="data">
          <caption class="visually-hidden">Encrypted volumes</caption>
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">Device</th>
              <th scope="col">UUID</th>
              <th scope="col">Recovery key escrowed</th>
              <th scope="col">Reported</th>
            </tr>
          </thead>
          <tbody>
            ${page.items.map((v) =>
              html`
                <tr>
                  <td><a href=${`/nodes?node=${v.node_id}`}>${v.node_name ?? v.node_id}</a></td>
                  <td><code>${v.device ?? v.mapper_name ?? "—"}</code></td>
                  <td><code>${v.uuid ?? "—"}</code></td>
                  <td>${v.escrowed ? "yes" : html`<sl-badge variant="warning">no</sl-badge>`}</td>
                  <td>${relativeTime(v.reported_at ?? null)}</td>
                </tr>
              `
            )}
          </tbody>
        </table>
      </div>
    `;
  }
}

customElements.define("svc-disk-encryption-page", SvcDiskEncryptionPage);
