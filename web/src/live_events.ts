/**
 * Live updates for the console: one `EventSource` on `GET /api/v1/events` per tab, shared by every page and
 * component that shows fleet state. The server sends hints ("nodes changed", with ids), never data; a
 * subscriber reloads what it shows through the ordinary API, at most once per second however many hints
 * arrive, and falls back to polling whenever the stream is down (not opened yet, refused, disconnected).
 *
 * The stream is opened with the first subscriber and closed a little after the last one leaves (so moving
 * between pages keeps it). Whenever it (re)opens every subscriber reloads once: hints sent while the stream
 * was down are not replayed.
 */
import type { ReactiveController, ReactiveControllerHost } from "lit";
import { api, apiUrl } from "./api.ts";

/** What a hint is about (the server's topics). */
export type LiveTopic = "nodes" | "compliance" | "policies";

/** One hint as the server sends it; `topic` is `resync` when hints were dropped (reload everything). */
export interface LiveHint {
  topic: LiveTopic | "resync";
  ids?: string[];
  revision?: number;
}

/** The stream's state as subscribers see it. */
export type LiveState = "connecting" | "live" | "down";

interface Subscriber {
  topics: ReadonlySet<LiveTopic>;
  onHint(hint: LiveHint): void;
  onState(state: LiveState): void;
}

const TOPICS: readonly LiveTopic[] = ["nodes", "compliance", "policies"];
/** How long the stream stays open without subscribers (navigation between pages). */
const IDLE_CLOSE_MS = 30_000;
/** Reconnect delays after the server refused or dropped the stream (EventSource gives up on an HTTP error). */
const RETRY_MS = [2_000, 5_000, 15_000, 30_000, 60_000];

/** The tab's one live-event connection. */
class LiveEvents {
  #source: EventSource | undefined;
  #subscribers = new Set<Subscriber>();
  #state: LiveState = "connecting";
  #failures = 0;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;

  constructor() {
    // A refreshed session may open what an expired one could not; a session that ended closes the stream.
    api.addEventListener("refreshed", () => {
      if (this.#state === "down" && this.#subscribers.size > 0) this.#reconnectNow();
    });
    api.addEventListener("session-expired", () => this.#close());
  }

  /** The current state. */
  get state(): LiveState {
    return this.#state;
  }

  /** Adds a subscriber; returns its unsubscribe function. */
  subscribe(subscriber: Subscriber): () => void {
    this.#subscribers.add(subscriber);
    clearTimeout(this.#idleTimer);
    if (!this.#source && this.#retryTimer === undefined) this.#open();
    subscriber.onState(this.#state);
    return () => {
      this.#subscribers.delete(subscriber);
      if (this.#subscribers.size === 0) {
        clearTimeout(this.#idleTimer);
        this.#idleTimer = setTimeout(() => this.#close(), IDLE_CLOSE_MS);
      }
    };
  }

  #setState(state: LiveState): void {
    if (state === this.#state) return;
    this.#state = state;
    for (const s of this.#subscribers) s.onState(state);
  }

  #deliver(hint: LiveHint): void {
    for (const s of this.#subscribers) {
      if (hint.topic === "resync" || s.topics.has(hint.topic)) s.onHint(hint);
    }
  }

  #open(): void {
    if (typeof EventSource === "undefined") return this.#setState("down");
    const source = new EventSource(apiUrl("/events"), { withCredentials: true });
    this.#source = source;
    source.addEventListener("open", () => {
      if (source !== this.#source) return;
      this.#failures = 0;
      this.#setState("live");
      // Whatever changed before the stream (re)opened was not sent: every subscriber that was already
      // waiting reloads once (on a tab's first page, a change between its first load and the stream
      // opening would otherwise go unseen until the next hint).
      this.#deliver({ topic: "resync" });
    });
    for (const topic of [...TOPICS, "resync"]) {
      source.addEventListener(topic, (event) => {
        if (source !== this.#source) return;
        try {
          this.#deliver(JSON.parse((event as MessageEvent<string>).data) as LiveHint);
        } catch {
          this.#deliver({ topic: "resync" });
        }
      });
    }
    source.addEventListener("error", () => {
      if (source !== this.#source) return;
      this.#setState("down");
      // CONNECTING: the browser reconnects by itself (after the server's `retry:`). CLOSED: it gave up (an
      // HTTP error such as 401 or 429): try again later, polling meanwhile.
      if (source.readyState === EventSource.CLOSED) {
        this.#source = undefined;
        source.close();
        const delay = RETRY_MS[Math.min(this.#failures++, RETRY_MS.length - 1)];
        this.#retryTimer = setTimeout(() => {
          this.#retryTimer = undefined;
          if (this.#subscribers.size > 0) this.#open();
        }, delay);
      }
    });
  }

  #reconnectNow(): void {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#source?.close();
    this.#source = undefined;
    this.#open();
  }

  #close(): void {
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#idleTimer);
    this.#retryTimer = undefined;
    this.#source?.close();
    this.#source = undefined;
    this.#setState("down");
    this.#state = "connecting";
  }
}

let shared: LiveEvents | undefined;

/** The tab's live-event connection (made on first use). */
export function liveEvents(): LiveEvents {
  shared ??= new LiveEvents();
  return shared;
}

/** Options of {@link LiveRefresh}. */
export interface LiveRefreshOptions {
  /** Topics whose hints make the host reload. */
  topics: readonly LiveTopic[];
  /** Reloads what the host shows (keeping filters and scroll: it must update in place). */
  reload(): Promise<void>;
  /** Polling interval while the stream is down; 0 = no polling. */
  pollMs(): number;
  /** When the host last loaded (ms since the epoch), for the polling decision; default: the last reload here. */
  loadedAt?(): number | undefined;
  /** Whether a hint of the host's topics concerns what it shows (default: every hint does). */
  relevant?(hint: LiveHint): boolean;
  /** Shortest time between two reloads caused by hints (default 1 s). */
  minIntervalMs?: number;
}

/**
 * Keeps a Lit element fresh: reloads on the hints of its topics (coalesced to at most one reload per
 * `minIntervalMs`, none while the tab is hidden — one when it shows again), polls while the stream is down,
 * and exposes `live` for the header. The host re-renders when `live` changes.
 */
export class LiveRefresh implements ReactiveController {
  /** True while hints arrive (the stream is open). */
  live = false;
  #host: ReactiveControllerHost;
  #options: LiveRefreshOptions;
  #unsubscribe: (() => void) | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #poll: ReturnType<typeof setInterval> | undefined;
  #lastReload = 0;
  #running: Promise<void> | undefined;
  #again = false;
  #stale = false;

  constructor(host: ReactiveControllerHost, options: LiveRefreshOptions) {
    this.#host = host;
    this.#options = options;
    host.addController(this);
  }

  hostConnected(): void {
    if (this.#options.topics.length > 0) {
      this.#unsubscribe = liveEvents().subscribe({
        topics: new Set(this.#options.topics),
        onHint: (hint) => {
          if (hint.topic === "resync" || (this.#options.relevant?.(hint) ?? true)) this.#schedule();
        },
        onState: (state) => {
          const live = state === "live";
          if (live !== this.live) {
            this.live = live;
            this.#host.requestUpdate();
          }
        },
      });
    }
    this.#poll = setInterval(() => this.#maybePoll(), 1_000);
    document.addEventListener("visibilitychange", this.#onVisibility);
  }

  hostDisconnected(): void {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    clearInterval(this.#poll);
    document.removeEventListener("visibilitychange", this.#onVisibility);
    this.live = false;
  }

  #onVisibility = (): void => {
    if (document.visibilityState === "visible" && this.#stale) this.#schedule();
  };

  #maybePoll(): void {
    const every = this.#options.pollMs();
    if (this.live || every <= 0 || document.visibilityState === "hidden" || this.#running) return;
    const loadedAt = this.#options.loadedAt ? this.#options.loadedAt() : this.#lastReload;
    if (Date.now() - (loadedAt ?? 0) >= every) void this.#run();
  }

  /** A hint arrived: reload once, no sooner than `minIntervalMs` after the previous hint-driven reload. */
  #schedule(): void {
    if (document.visibilityState === "hidden") {
      this.#stale = true;
      return;
    }
    this.#stale = false;
    if (this.#running) {
      this.#again = true;
      return;
    }
    if (this.#timer !== undefined) return;
    const wait = Math.max(0, this.#lastReload + (this.#options.minIntervalMs ?? 1_000) - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#run();
    }, wait);
  }

  async #run(): Promise<void> {
    this.#lastReload = Date.now();
    this.#running = this.#options.reload();
    try {
      await this.#running;
    } finally {
      this.#running = undefined;
      if (this.#again) {
        this.#again = false;
        this.#schedule();
      }
    }
  }
}
