/**
 * One console's live-event stream (server-sent events): hints are coalesced per topic and written at most
 * once per `coalesceMs`, a comment goes out every `heartbeatMs` after the caller's session was checked
 * again, and the queue toward the client is bounded.
 *
 * Why the queue cannot grow: the stream is a pull source with a byte high-water mark. The web port reads it
 * only as fast as the client takes data, so a client that stops reading leaves the queue full. Hints that
 * arrive then are not queued; they are dropped together with whatever is pending, and the client gets one
 * `resync` event as soon as it reads again (it reloads everything it shows, which is what a burst of hints
 * would have made it do anyway). A client whose queue stays full for `stallMs` is disconnected;
 * EventSource reconnects and the page reloads.
 */
import { type LiveHint, type LiveTopic, MAX_HINT_IDS, TOPIC_PERMISSIONS } from "./publish.ts";

/** Tunables of one stream. */
export interface SseOptions {
  /** Comment and session check interval. */
  heartbeatMs: number;
  /** Shortest time between two writes of hints. */
  coalesceMs: number;
  /** Bytes the stream may hold for a client that does not read. */
  queueBytes: number;
  /** A client whose queue stays full this long is disconnected. */
  stallMs: number;
  /** The reconnect delay the client is told (`retry:`). */
  retryMs: number;
  /** The caller's permissions now, or null when the session ended (logout, revocation, expiry). */
  recheck(): Promise<ReadonlySet<string> | null>;
  /** Called once when the stream ends, for whatever reason. */
  onClose(reason: string): void;
}

/** A live-event stream and what the broker feeds it. */
export interface SseStream {
  /** The response body. */
  body: ReadableStream<Uint8Array>;
  /** Offers a hint; dropped unless the caller may see its topic. */
  offer(hint: LiveHint): void;
  /** Ends the stream (server shutdown). */
  close(reason: string): void;
  /** True while the client is not reading and hints are being dropped. */
  readonly lagging: boolean;
}

interface Pending {
  ids: Set<string> | "any";
  revision?: number;
}

const encoder = new TextEncoder();

/** The SSE text of one event. */
function eventText(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Starts a stream for a caller holding `permissions`. */
export function createSseStream(permissions: ReadonlySet<string>, options: SseOptions): SseStream {
  let allowed = permissions;
  const pending = new Map<LiveTopic, Pending>();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let closed = false;
  let lagging = false;
  /** When the client stopped taking data (the queue filled up); meaningful while `lagging`. */
  let laggingSince = 0;
  let lastFlush = 0;
  let flushTimer: ReturnType<typeof setTimeout> | undefined;
  let checking = false;

  const heartbeat = setInterval(() => void beat(), options.heartbeatMs);

  function finish(reason: string, how: "close" | "error" | "cancelled"): void {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    clearTimeout(flushTimer);
    pending.clear();
    try {
      if (how === "close") controller.close();
      // An error makes the web port reset the HTTP/2 stream or cut the HTTP/1.1 connection at once, instead
      // of waiting for a client that does not read to take the rest of the queue.
      if (how === "error") controller.error(new Error(reason));
    } catch {
      // Already closed by the other side.
    }
    options.onClose(reason);
  }

  function roomy(): boolean {
    return (controller.desiredSize ?? 0) > 0;
  }

  function write(text: string): void {
    controller.enqueue(encoder.encode(text));
  }

  function flush(): void {
    flushTimer = undefined;
    if (closed || pending.size === 0) return;
    if (lagging || !roomy()) {
      // The client is behind: forget the details, it gets one `resync` when it reads again.
      if (!lagging) laggingSince = performance.now();
      lagging = true;
      pending.clear();
      return;
    }
    let text = "";
    for (const [topic, p] of pending) {
      const data: Record<string, unknown> = { topic };
      if (p.ids !== "any") data.ids = [...p.ids];
      if (p.revision !== undefined) data.revision = p.revision;
      text += eventText(topic, data);
    }
    pending.clear();
    lastFlush = performance.now();
    write(text);
  }

  function scheduleFlush(): void {
    if (flushTimer !== undefined || closed) return;
    const wait = Math.max(0, lastFlush + options.coalesceMs - performance.now());
    flushTimer = setTimeout(flush, wait);
  }

  async function beat(): Promise<void> {
    if (closed || checking) return;
    if (lagging && performance.now() - laggingSince > options.stallMs) {
      return finish("the client stopped reading its live-event stream", "error");
    }
    checking = true;
    let fresh: ReadonlySet<string> | null;
    try {
      fresh = await options.recheck();
    } catch {
      // The check itself failed (database away): keep the stream, check again at the next beat.
      fresh = allowed;
    } finally {
      checking = false;
    }
    if (closed) return;
    if (fresh === null) return finish("the session ended", "close");
    allowed = fresh;
    if (!lagging && roomy()) write(": heartbeat\n\n");
  }

  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        write(`retry: ${options.retryMs}\n: live events; hints only, reload what you show\n\n`);
      },
      pull() {
        // The client took data and the queue has room again.
        if (closed) return;
        if (lagging) {
          lagging = false;
          write(eventText("resync", { topic: "resync" }));
        }
        if (pending.size > 0) scheduleFlush();
      },
      cancel() {
        finish("the client went away", "cancelled");
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: options.queueBytes }),
  );

  return {
    body,
    offer(hint) {
      if (closed || !allowed.has(TOPIC_PERMISSIONS[hint.topic])) return;
      if (lagging) return;
      const p = pending.get(hint.topic) ?? { ids: new Set<string>() };
      if (!hint.ids || p.ids === "any") p.ids = "any";
      else {
        for (const id of hint.ids) p.ids.add(id);
        if (p.ids.size > MAX_HINT_IDS) p.ids = "any";
      }
      if (hint.revision !== undefined) p.revision = Math.max(p.revision ?? 0, hint.revision);
      pending.set(hint.topic, p);
      scheduleFlush();
    },
    close(reason) {
      finish(reason, "close");
    },
    get lagging() {
      return lagging;
    },
  };
}
