/**
 * Base class of every page: renders into the light DOM (so the app stylesheet styles tables and forms, and
 * tests and assistive technology see one document), sets `document.title`, and keeps the last load error.
 *
 * Pages that show fleet state name the live-event topics they depend on (`liveTopics`): they reload when the
 * server says something of that kind changed (at most once per second, in place, so filters and scroll
 * stay) and poll every `autoRefreshMs` only while the live stream is down. The header says "Live" or
 * "Updated … ago".
 */
import { html, nothing, type PropertyDeclarations, type TemplateResult } from "lit";
import { LightElement } from "./light_element.ts";
import { ApiError } from "../api.ts";
import { forbiddenText } from "../permission_text.ts";
import { LiveRefresh, type LiveTopic } from "../live_events.ts";
import type { RouteMatch } from "../router.ts";
import { TableCards } from "./table_cards.ts";

/** A page of the console. */
export class PageElement extends LightElement {
  static override properties: PropertyDeclarations = {
    route: { attribute: false },
    loading: { state: true },
    loadError: { state: true },
    loadedAt: { state: true },
    now: { state: true },
  };

  /**
   * The properties of a page with its own internal reactive state, named: `static override properties =
   * PageElement.withState("editing", "editError")` (each re-renders the page when assigned).
   */
  static withState(...names: string[]): PropertyDeclarations {
    return { ...PageElement.properties, ...Object.fromEntries(names.map((name) => [name, { state: true }])) };
  }

  /** The route that opened the page (params and query). */
  declare route: RouteMatch;
  declare loading: boolean;
  declare loadError: unknown;
  /** When the last load succeeded (ms since the epoch). */
  declare loadedAt: number | undefined;
  declare now: number;

  /**
   * Fleet pages set this: while the live stream is down the page reloads itself this often while visible
   * (filters live in the URL and the DOM is updated in place, so filters and scroll stay), and the header
   * says when it last did.
   */
  protected autoRefreshMs = 0;
  /** Fleet pages set this: the kinds of change that make the page reload (e.g. `["nodes", "compliance"]`). */
  protected liveTopics: readonly LiveTopic[] = [];
  #live: LiveRefresh | undefined;
  #clock: ReturnType<typeof setInterval> | undefined;
  #loading: Promise<void> | undefined;

  /** Title shown in the heading and the browser tab. */
  pageTitle = "";

  constructor() {
    super();
    // Every table of every page becomes cards on a phone (table_cards.ts).
    new TableCards(this);
    this.loading = false;
    this.loadError = undefined;
    this.now = Date.now();
  }

  override connectedCallback(): void {
    super.connectedCallback();
    globalThis.addEventListener("beforeunload", this.#beforeUnload);
    if (this.pageTitle) document.title = `${this.pageTitle} · svc`;
    void this.reload();
    if (this.autoRefreshMs > 0 || this.liveTopics.length > 0) {
      this.#live ??= new LiveRefresh(this, {
        topics: this.liveTopics,
        // After a load in flight, never beside it: an older answer must not land after a newer one.
        reload: async () => {
          await this.#loading;
          await this.reload();
        },
        pollMs: () => this.autoRefreshMs,
        loadedAt: () => this.loadedAt,
      });
      // Keeps "Updated … ago" current.
      this.#clock = setInterval(() => this.now = Date.now(), 5_000);
    }
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    globalThis.removeEventListener("beforeunload", this.#beforeUnload);
    clearInterval(this.#clock);
  }

  /** Loads the page's data; errors end up in `loadError` and are shown by {@link renderLoadError}. */
  reload(): Promise<void> {
    const run = this.#reload();
    this.#loading = run;
    return run;
  }

  async #reload(): Promise<void> {
    this.loading = true;
    try {
      await this.load();
      this.loadError = undefined;
      this.loadedAt = Date.now();
      this.now = this.loadedAt;
    } catch (err) {
      // A 401 already sent the person to the login screen; nothing to show here.
      if (!(err instanceof ApiError && err.status === 401)) this.loadError = err;
    } finally {
      this.loading = false;
    }
  }

  /** Fetches what the page shows. */
  protected load(): Promise<void> {
    return Promise.resolve();
  }

  /** The page heading with optional actions on the right. */
  protected renderHeader(actions: TemplateResult | typeof nothing = nothing, intro = ""): TemplateResult {
    return html`
      <header class="page-header">
        <div>
          <h1>${this.pageTitle}</h1>
          ${intro ? html`<p class="page-intro">${intro}</p>` : nothing}
        </div>
        <div class="page-actions">${this.renderUpdated()}${actions}</div>
      </header>
    `;
  }

  /**
   * The load error, if any, with a retry button — except when retrying cannot help (the thing does not exist,
   * or the person may not see it).
   */
  protected renderLoadError(): TemplateResult | typeof nothing {
    if (!this.loadError) return nothing;
    const final = this.loadError instanceof ApiError && [403, 404].includes(this.loadError.status);
    return html`
      <sl-alert variant="danger" open class="load-error">
        <sl-icon slot="icon" name="exclamation-octagon"></sl-icon>
        ${errorText(this.loadError)}
        ${final ? nothing : html`<sl-button size="small" @click=${() => this.reload()}>Try again</sl-button>`}
      </sl-alert>
    `;
  }

  /** "Live" while changes arrive as they happen, else "Updated … ago", for pages that refresh themselves. */
  protected renderUpdated(): TemplateResult | typeof nothing {
    if (!this.#live) return nothing;
    if (this.#live.live) {
      return html`
        <span class="muted updated-at live-status" title="Changes appear here as they happen"
        ><sl-badge variant="success" pill pulse>Live</sl-badge></span>
      `;
    }
    if (!this.loadedAt) return nothing;
    const seconds = Math.max(0, Math.round((this.now - this.loadedAt) / 1000));
    const text = seconds < 5
      ? "just now"
      : seconds < 60
      ? `${seconds} s ago`
      : `${Math.round(seconds / 60)} min ago`;
    return html`<span class="muted updated-at" title="This page refreshes itself">Updated ${text}</span>`;
  }

  /** Closing or reloading the tab asks first while the page holds unsaved changes (as the shell does for links). */
  #beforeUnload = (e: BeforeUnloadEvent) => {
    if (this.hasUnsavedChanges()) e.preventDefault();
  };

  /**
   * True while the page holds changes it has not saved; the shell then asks before a link navigates away,
   * and the browser before the tab closes or reloads (editors override it).
   */
  hasUnsavedChanges(): boolean {
    return false;
  }

  /** A spinner while the first load runs; nothing once it failed (the error is shown instead). */
  protected renderSpinner(): TemplateResult {
    return this.loadError ? html`` : html`<sl-spinner aria-label="Loading"></sl-spinner>`;
  }
}

/** The message a person should read for any thrown value. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 403) return forbiddenText(err.message);
    return err.message;
  }
  if (err instanceof Error) return err.message;
  return String(err);
}
