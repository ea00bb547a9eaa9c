/**
 * `<svc-app>`: the shell. Loads the session, shows the login screen when there is none (keeping the URL,
 * so the person lands where they were after logging in), and otherwise the masthead, the navigation and the
 * page for the current route. Links inside the app are handled by the client router.
 */
import { html, nothing, type TemplateResult } from "lit";
import { LightElement } from "./components/light_element.ts";
import { api } from "./api.ts";
import { session } from "./session.ts";
import {
  isExternalClick,
  matchRoute,
  navigate,
  NAVIGATE_EVENT,
  type RouteMatch,
  type RouteName,
} from "./router.ts";
import { applyTheme, storedTheme, type ThemeChoice } from "./theme.ts";
import { errorText } from "./components/page.ts";
import { confirmAction } from "./components/ui.ts";
import "./components/deploy_agent.ts";
import "./components/mfa_settings.ts";
import "./components/mfa_step_up_dialog.ts";

interface NavItem {
  route: RouteName;
  href: string;
  label: string;
  icon: string;
  /** Shown when the person holds any of these (empty: always). */
  anyOf: string[];
}

const NAV: ReadonlyArray<{ label: string; items: NavItem[] }> = [
  {
    label: "Overview",
    items: [{ route: "dashboard", href: "/", label: "Dashboard", icon: "speedometer2", anyOf: [] }],
  },
  {
    label: "Fleet",
    items: [
      { route: "nodes", href: "/nodes", label: "Nodes", icon: "pc-display", anyOf: ["node:view"] },
      {
        route: "node-groups",
        href: "/node-groups",
        label: "Node groups",
        icon: "collection",
        anyOf: ["node_group:view"],
      },
      {
        route: "compliance",
        href: "/compliance",
        label: "Compliance",
        icon: "clipboard-check",
        anyOf: ["compliance:view"],
      },
      {
        route: "disk-encryption",
        href: "/disk-encryption",
        label: "Disk encryption",
        icon: "shield-lock",
        anyOf: ["disk_encryption:view"],
      },
    ],
  },
  {
    label: "Policy",
    items: [
      {
        route: "policies",
        href: "/policies",
        label: "Policies",
        icon: "file-earmark-text",
        anyOf: ["policy:view"],
      },
      {
        route: "policy-bindings",
        href: "/policy-bindings",
        label: "Policy bindings",
        icon: "link-45deg",
        anyOf: ["binding:view"],
      },
    ],
  },
  {
    label: "System",
    items: [
      {
        route: "audit-logs",
        href: "/audit-logs",
        label: "Audit logs",
        icon: "journal-text",
        anyOf: ["audit_log:view"],
      },
      {
        route: "settings",
        href: "/settings",
        label: "Settings",
        icon: "gear",
        anyOf: ["user:view", "role:view", "user_group:view", "settings:view"],
      },
    ],
  },
];

/**
 * Route → custom element of its page, the module defining it, and the nav item of the route (if any), which
 * says who may see it. Pages are loaded on first visit (the build splits each into its own chunk), so the
 * first screen downloads the shell and one page, not the whole console.
 */
const PAGES: Record<RouteName, { tag: string; nav: RouteName; load: () => Promise<unknown> }> = {
  "dashboard": { tag: "svc-dashboard-page", nav: "dashboard", load: () => import("./pages/dashboard.ts") },
  "policies": { tag: "svc-policies-page", nav: "policies", load: () => import("./pages/policies.ts") },
  "policy-new": {
    tag: "svc-policy-flow-page",
    nav: "policies",
    load: () => import("./pages/policy_flow.ts"),
  },
  "policy-edit": {
    tag: "svc-policy-editor-page",
    nav: "policies",
    load: () => import("./pages/policy_editor.ts"),
  },
  "nodes": { tag: "svc-nodes-page", nav: "nodes", load: () => import("./pages/nodes.ts") },
  "node-groups": {
    tag: "svc-node-groups-page",
    nav: "node-groups",
    load: () => import("./pages/node_groups.ts"),
  },
  "policy-bindings": {
    tag: "svc-policy-bindings-page",
    nav: "policy-bindings",
    load: () => import("./pages/policy_bindings.ts"),
  },
  "compliance": {
    tag: "svc-compliance-page",
    nav: "compliance",
    load: () => import("./pages/compliance.ts"),
  },
  "disk-encryption": {
    tag: "svc-disk-encryption-page",
    nav: "disk-encryption",
    load: () => import("./pages/disk_encryption.ts"),
  },
  "audit-logs": {
    tag: "svc-audit-logs-page",
    nav: "audit-logs",
    load: () => import("./pages/audit_logs.ts"),
  },
  "settings": { tag: "svc-settings-page", nav: "settings", load: () => import("./pages/settings.ts") },
};

/** How long after the first page the others are fetched in the background. */
const PREFETCH_DELAY_MS = 2000;

function navItem(route: RouteName): NavItem | undefined {
  for (const group of NAV) for (const item of group.items) if (item.route === route) return item;
  return undefined;
}

function allowed(item: NavItem | undefined): boolean {
  return !item || item.anyOf.length === 0 || session.canAny(...item.anyOf);
}

class SvcApp extends LightElement {
  static override properties = {
    phase: { state: true },
    route: { state: true },
    theme: { state: true },
    version: { state: true },
    startError: { state: true },
    navOpen: { state: true },
    pageLoadError: { state: true },
  };
  /** The current page's module failed to load (a new release replaced its chunk, or the network). */
  declare pageLoadError: unknown;
  /** On narrow screens the navigation is a menu behind the masthead's Menu button. */
  declare navOpen: boolean;
  declare phase: "starting" | "login" | "ready";
  declare route: RouteMatch | undefined;
  declare theme: ThemeChoice;
  declare version: string;
  declare startError: unknown;
  #page: HTMLElement | undefined;
  #prefetched = false;
  #navigations = 0;

  constructor() {
    super();
    this.phase = "starting";
    this.route = undefined;
    this.theme = storedTheme();
    this.version = "";
    this.startError = undefined;
    this.navOpen = false;
    this.pageLoadError = undefined;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    applyTheme(this.theme);
    globalThis.addEventListener("popstate", this.#onLocation);
    globalThis.addEventListener(NAVIGATE_EVENT, this.#onLocation);
    document.addEventListener("click", this.#onClick);
    api.addEventListener("session-expired", this.#onExpired);
    api.addEventListener("activity", this.#onActivity);
    session.addEventListener("change", this.#onSession);
    this.#resolveRoute();
    void this.#start();
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    globalThis.removeEventListener("popstate", this.#onLocation);
    globalThis.removeEventListener(NAVIGATE_EVENT, this.#onLocation);
    document.removeEventListener("click", this.#onClick);
    api.removeEventListener("session-expired", this.#onExpired);
    api.removeEventListener("activity", this.#onActivity);
    session.removeEventListener("change", this.#onSession);
  }

  /**
   * Once the first page is up, the other pages this person may open are fetched in the background (after a
   * pause, at low priority), so a later click shows its page at once: the first screen waited only for the
   * shell and its own page.
   */
  protected override updated(): void {
    if (this.phase !== "ready" || this.#prefetched) return;
    this.#prefetched = true;
    setTimeout(() => {
      for (const page of Object.values(PAGES)) {
        if (allowed(navItem(page.nav))) page.load().catch(() => {});
      }
    }, PREFETCH_DELAY_MS);
  }

  async #start(): Promise<void> {
    api.call("GET /api/v1/version").then((v) => this.version = v.version, () => {});
    try {
      this.phase = await session.load() ? "ready" : "login";
    } catch (err) {
      this.startError = err;
    }
  }

  #onSession = () => {
    const next = session.me ? "ready" : "login";
    if (next === "ready" && this.phase !== "ready") this.#page = undefined;
    this.phase = next;
    // Enrolling a required second factor changes `/auth/me`, not the phase: render again.
    this.requestUpdate();
  };

  /** `aria-busy` on the page while the API answers, so assistive technology waits for the content. */
  #onActivity = () => {
    this.querySelector("main")?.setAttribute("aria-busy", api.active > 0 ? "true" : "false");
  };

  #onExpired = () => {
    session.me = undefined;
    this.phase = "login";
  };

  #onLocation = () => {
    this.navOpen = false;
    this.#resolveRoute();
    const main = this.querySelector<HTMLElement>("#main");
    main?.focus({ preventScroll: true });
  };

  #onClick = (event: MouseEvent) => {
    const anchor = event.composedPath().find((n): n is HTMLAnchorElement => n instanceof HTMLAnchorElement);
    if (!anchor || !anchor.href || isExternalClick(event, anchor)) return;
    event.preventDefault();
    const url = new URL(anchor.href);
    const target = url.pathname + url.search;
    const page = this.#page as (HTMLElement & { hasUnsavedChanges?(): boolean }) | undefined;
    if (!page?.isConnected || !page.hasUnsavedChanges?.()) return navigate(target);
    void this.#confirmLeave().then((leave) => {
      if (leave) navigate(target);
    });
  };

  /** Asks before a link leaves a page with unsaved changes (an editor); true when it may go. */
  async #confirmLeave(): Promise<boolean> {
    return await confirmAction({
      title: "Leave without saving?",
      message: "Your changes on this page are not saved yet. Leaving now loses them; stay to save them.",
      confirmLabel: "Leave and lose the changes",
      cancelLabel: "Stay",
      danger: true,
    });
  }

  #resolveRoute(): void {
    const match = matchRoute(location.pathname, location.search);
    if (!match) {
      history.replaceState(null, "", "/");
      this.route = matchRoute("/");
    } else {
      this.route = match;
    }
    this.#navigations++;
    this.#page = undefined;
    this.pageLoadError = undefined;
  }

  #pageElement(): HTMLElement | TemplateResult {
    const route = this.route!;
    const page = PAGES[route.name];
    if (!allowed(navItem(page.nav))) {
      document.title = "Not allowed · svc";
      return html`
        <div class="empty-state" role="status">
          <h1>Not allowed</h1>
          <p>Your roles do not include access to this page. Ask an administrator for the permission you need.</p>
        </div>
      `;
    }
    if (this.pageLoadError) {
      return html`
        <div class="empty-state" role="alert">
          <h1>This page could not load</h1>
          <p>${errorText(this.pageLoadError)}. Reload to fetch the console again.</p>
          <sl-button @click=${() => location.reload()}>Reload</sl-button>
        </div>
      `;
    }
    if (!customElements.get(page.tag)) {
      // The page is created once its module has defined it (properties set on an element before its
      // upgrade would be lost); meanwhile the shell says it is loading.
      const navigation = this.#navigations;
      page.load().then(() => {
        if (navigation === this.#navigations) this.requestUpdate();
      }, (err) => {
        if (navigation === this.#navigations) this.pageLoadError = err;
      });
      return html`<div class="app-loading" role="status"><sl-spinner></sl-spinner> Loading…</div>`;
    }
    if (!this.#page || this.#page.dataset.navigation !== String(this.#navigations)) {
      const el = document.createElement(page.tag) as HTMLElement & { route: RouteMatch };
      el.route = route;
      el.dataset.navigation = String(this.#navigations);
      this.#page = el;
    }
    return this.#page;
  }

  #setTheme(choice: ThemeChoice): void {
    this.theme = choice;
    applyTheme(choice);
  }

  async #logout(): Promise<void> {
    try {
      await session.logout();
    } catch {
      // The cookies may already be gone; the login screen is the right place either way.
    }
  }

  override render() {
    if (this.startError) {
      return html`
        <main id="main" class="start-error">
          <h1>svc</h1>
          <sl-alert variant="danger" open>The console could not start: ${errorText(
            this.startError,
          )}</sl-alert>
          <sl-button @click=${() => location.reload()}>Reload</sl-button>
        </main>
      `;
    }
    if (this.phase === "starting") {
      return html`<div class="app-loading" role="status"><sl-spinner></sl-spinner> Loading…</div>`;
    }
    if (this.phase === "login") return html`<svc-login-page></svc-login-page>`;
    if (session.me?.secondFactor.enrolmentRequired) {
      return html`<svc-mfa-required-page></svc-mfa-required-page>`;
    }
    return html`
      <a class="skip-link" href="#main" @click=${(e: Event) => {
        e.preventDefault();
        this.querySelector<HTMLElement>("#main")?.focus();
      }}>Skip to main content</a>
      <div class="layout">
        ${this.#renderMasthead()}
        ${this.#renderNav()}
        <main id="main" tabindex="-1" aria-busy=${api.active > 0 ? "true" : "false"}>${this
          .#pageElement()}</main>
        <footer class="footer">svc ${this.version}</footer>
      </div>
    `;
  }

  #renderMasthead(): TemplateResult {
    const me = session.me!;
    return html`
      <header class="masthead">
        <button type="button" class="nav-toggle" aria-controls="main-nav" aria-expanded=${this.navOpen
          ? "true"
          : "false"}
          @click=${() => this.navOpen = !this.navOpen}>
          <sl-icon name=${this.navOpen ? "x-lg" : "list"} aria-hidden="true"></sl-icon> Menu</button>
        <a class="brand" href="/"><img src="/assets/favicon.svg" alt="" width="28" height="28"> svc</a>
        <div class="masthead-actions">
          <svc-deploy-agent></svc-deploy-agent>
          <sl-dropdown placement="bottom-end" class="theme-menu">
            <sl-button slot="trigger" size="small" caret>
              <sl-icon slot="prefix" name="circle-half"></sl-icon>Theme
            </sl-button>
            <sl-menu @sl-select=${(e: CustomEvent<{ item: { value: string } }>) =>
              this.#setTheme(e.detail.item.value as ThemeChoice)}>
              ${(["system", "light", "dark"] as const).map((t) =>
                html`<sl-menu-item type="checkbox" value=${t} ?checked=${this.theme === t}>
                  ${t === "system" ? "Follow the system" : t === "light" ? "Light" : "Dark"}</sl-menu-item>`
              )}
            </sl-menu>
          </sl-dropdown>
          <sl-dropdown placement="bottom-end">
            <sl-button slot="trigger" size="small" caret class="user-menu">
              <sl-icon slot="prefix" name="person-circle"></sl-icon>${me.user.username}
            </sl-button>
            <sl-menu @sl-select=${(e: CustomEvent<{ item: { value: string } }>) => {
              if (e.detail.item.value === "logout") void this.#logout();
            }}>
              <sl-menu-item disabled>${me.user.fullName || me.user.username} (${me.user
                .source})</sl-menu-item>
              <sl-divider></sl-divider>
              <sl-menu-item
                value="logout"><sl-icon slot="prefix" name="box-arrow-right"></sl-icon>Log out</sl-menu-item>
            </sl-menu>
          </sl-dropdown>
        </div>
      </header>
    `;
  }

  #renderNav(): TemplateResult {
    const current = this.route ? PAGES[this.route.name].nav : undefined;
    return html`
      <nav id="main-nav" class=${this.navOpen ? "sidebar open" : "sidebar"} aria-label="Main">
        ${NAV.map((group) => {
          const items = group.items.filter((i) => allowed(i));
          if (items.length === 0) return nothing;
          return html`
            <h2 class="nav-group">${group.label}</h2>
            <ul>
              ${items.map((i) =>
                html`
                  <li>
                    <a href=${i.href} aria-current=${i.route === current ? "page" : "false"}>
                                      <sl-icon name=${i.icon} aria-hidden="true"></sl-icon>${i.label}
                                    </a>
                  </li>
                `
              )}
            </ul>
          `;
        })}
      </nav>
    `;
  }
}

customElements.define("svc-app", SvcApp);
