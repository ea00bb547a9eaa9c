/**
 * The live-event broker of one server process: it receives live hints (`publish.ts`) and the hub's resync
 * notices through the database's LISTEN/NOTIFY (so a change made through any replica or policy worker
 * reaches the consoles connected here), and hands each to the console streams it serves (`sse.ts`), which
 * filter by permission and coalesce. It also enforces the stream limits of `events.*` and keeps the
 * open-streams gauge.
 *
 * One broker per server context, made on first use: routes are built from the context alone, and a process
 * that never serves a console stream never listens.
 */
import type { ServerContext } from "../context.ts";
import { DomainError } from "../core/errors.ts";
import { HUB_CHANNEL, type HubNotice } from "./hub_notice.ts";
import { incLiveEventStreamsOpen } from "../metrics/counters.ts";
import { LIVE_CHANNEL, LIVE_TOPICS, type LiveHint, MAX_HINT_IDS, parseLiveHint } from "./publish.ts";
import { createSseStream, type SseOptions, type SseStream } from "./sse.ts";

/** Stream tunables that are not configuration (tests shorten them). */
export interface BrokerTuning {
  /** Shortest time between two writes of hints to one stream (default 250 ms). */
  coalesceMs?: number;
  /** Bytes a stream may hold for a client that does not read (default 64 KiB). */
  queueBytes?: number;
}

/** The caller a stream is opened for. */
export interface StreamCaller {
  userId: string;
  permissions: ReadonlySet<string>;
  /** The caller's permissions now, or null once the session ended. */
  recheck(): Promise<ReadonlySet<string> | null>;
}

/** The broker of one server process. */
export interface LiveBroker {
  /** Opens a stream (429 over a limit); the body ends when the client leaves, the session ends or on stop. */
  open(caller: StreamCaller): Promise<ReadableStream<Uint8Array>>;
  /** Open streams, and how many of them are lagging (their client is not reading). */
  stats(): { streams: number; lagging: number };
  /** Closes every stream and stops listening. */
  stop(): Promise<void>;
}

const brokers = new WeakMap<ServerContext, LiveBroker>();
const tunings = new WeakMap<ServerContext, BrokerTuning>();

/** The broker of `ctx` (made on first use). */
export function liveBroker(ctx: ServerContext): LiveBroker {
  let broker = brokers.get(ctx);
  if (!broker) brokers.set(ctx, broker = createBroker(ctx, tunings.get(ctx) ?? {}));
  return broker;
}

/** Sets stream tunables for `ctx` before its broker is first used (tests and benchmarks). */
export function tuneLiveBroker(ctx: ServerContext, tuning: BrokerTuning): void {
  tunings.set(ctx, tuning);
}

/** Closes the console streams of `ctx` (server shutdown: before the web port waits for open requests). */
export async function stopLiveEvents(ctx: ServerContext): Promise<void> {
  await brokers.get(ctx)?.stop();
}

function createBroker(ctx: ServerContext, tuning: BrokerTuning): LiveBroker {
  const { config, db, log } = ctx;
  const streams = new Set<{ userId: string; stream: SseStream }>();
  const perUser = new Map<string, number>();
  let listening: Promise<Array<() => Promise<void>>> | undefined;
  let stopped = false;

  function fanOut(hint: LiveHint): void {
    for (const s of streams) s.stream.offer(hint);
  }

  function onLive(payload: string): void {
    const hint = parseLiveHint(payload);
    if (hint) fanOut(hint);
  }

  function onHub(payload: string): void {
    let notice: HubNotice;
    try {
      notice = JSON.parse(payload);
    } catch {
      return;
    }
    if (notice.kind !== "resync") return;
    const ids = notice.nodeGroupIds.length <= MAX_HINT_IDS ? notice.nodeGroupIds : undefined;
    fanOut({ topic: "policies", ids: ids?.length ? ids : undefined, revision: notice.revision });
  }

  /**
   * The listening connection was lost and is back: hints sent meanwhile are gone (they have no log, unlike
   * the hub's resyncs), so every stream hears that anything may have changed and its pages reload.
   */
  function onRelisten(): void {
    log.info("live events: notifications may have been missed while the database connection was down");
    for (const topic of LIVE_TOPICS) fanOut({ topic });
  }

  function listen(): Promise<Array<() => Promise<void>>> {
    listening ??= Promise.all([
      db.listen(LIVE_CHANNEL, onLive, onRelisten),
      db.listen(HUB_CHANNEL, onHub, onRelisten),
    ]).catch(
      (err) => {
        listening = undefined;
        throw err;
      },
    );
    return listening;
  }

  function limitError(message: string): DomainError {
    return new DomainError("too_many_requests", message, undefined, {
      code: "too_many_streams",
      retryAfterSeconds: 30,
    });
  }

  return {
    async open(caller) {
      // Listening before the stream is answered: a change committed after the client sees the stream open
      // is never missed. The limits are checked after it, with no await between check and registration.
      await listen();
      if (stopped) throw new DomainError("unavailable", "the server is shutting down; reconnect");
      const { maxStreams, maxStreamsPerUser, heartbeatSeconds } = config.events;
      if (streams.size >= maxStreams) {
        throw limitError(
          `this server already serves ${maxStreams} live-event streams (events.max_streams); the console ` +
            "falls back to refreshing itself",
        );
      }
      if ((perUser.get(caller.userId) ?? 0) >= maxStreamsPerUser) {
        throw limitError(
          `you already have ${maxStreamsPerUser} live-event streams open (events.max_streams_per_user); ` +
            "close other console tabs",
        );
      }
      const entry = { userId: caller.userId } as { userId: string; stream: SseStream };
      const options: SseOptions = {
        heartbeatMs: heartbeatSeconds * 1000,
        coalesceMs: tuning.coalesceMs ?? 250,
        queueBytes: tuning.queueBytes ?? 64 * 1024,
        stallMs: 2 * heartbeatSeconds * 1000,
        retryMs: 5_000,
        recheck: caller.recheck,
        onClose(reason) {
          if (!streams.delete(entry)) return;
          const left = (perUser.get(caller.userId) ?? 1) - 1;
          if (left > 0) perUser.set(caller.userId, left);
          else perUser.delete(caller.userId);
          incLiveEventStreamsOpen(-1);
          log.debug("live events: stream closed", { user: caller.userId, reason });
        },
      };
      entry.stream = createSseStream(caller.permissions, options);
      streams.add(entry);
      perUser.set(caller.userId, (perUser.get(caller.userId) ?? 0) + 1);
      incLiveEventStreamsOpen(1);
      return entry.stream.body;
    },
    stats() {
      let lagging = 0;
      for (const s of streams) if (s.stream.lagging) lagging++;
      return { streams: streams.size, lagging };
    },
    async stop() {
      stopped = true;
      for (const s of [...streams]) s.stream.close("the server is shutting down");
      const unlisten = await listening?.catch(() => []) ?? [];
      listening = undefined;
      for (const u of unlisten) await u().catch(() => {});
    },
  };
}
