/**
 * The agent's logger: one readable line per event on stderr (journald adds the time stamp
 * and unit), details as `key=value`; or, with `log.format: json`, one JSON object per line
 * (`time`, `level`, `msg`, then the details; a detail named like one of those gets a trailing
 * `_`). The types are shared with the server's logger (shared/log_types.ts); the line format is
 * the agent's own.
 *
 * @module
 */

import type { LogFormat, Logger, LogLevel } from "../shared/log_types.ts";
export { LOG_FORMATS } from "../shared/log_types.ts";
export type { LogFormat, Logger, LogLevel } from "../shared/log_types.ts";

/** Every level, in increasing severity. */
export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

/** Options of {@linkcode createLogger}. */
export interface LoggerOptions {
  /** Lowest level written; default `info`. */
  level?: LogLevel;
  /** Receives each finished line; default writes to stderr. */
  sink?: (line: string) => void;
  /** Line format; default `text`. */
  format?: LogFormat;
}

const RESERVED = new Set(["time", "level", "msg"]);

function formatValue(value: unknown): string {
  if (typeof value === "string") return /[\s"=]/.test(value) ? JSON.stringify(value) : value;
  if (value instanceof Error) return JSON.stringify(value.message);
  return JSON.stringify(value);
}

/** Creates a logger that writes lines at or above `level`. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const min = LOG_LEVELS.indexOf(options.level ?? "info");
  const sink = options.sink ?? ((line: string) => console.error(line));
  const emit = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(level) < min) return;
    if (options.format === "json") {
      const out: Record<string, unknown> = { time: new Date().toISOString(), level, msg };
      for (const [k, v] of Object.entries(fields ?? {})) {
        if (v !== undefined) out[RESERVED.has(k) ? `${k}_` : k] = v instanceof Error ? v.message : v;
      }
      return sink(JSON.stringify(out));
    }
    const extra = fields
      ? Object.entries(fields).filter(([, v]) => v !== undefined).map(([k, v]) => ` ${k}=${formatValue(v)}`)
        .join("")
      : "";
    sink(`${new Date().toISOString()} ${level.toUpperCase()} ${msg}${extra}`);
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

/** A logger that drops everything (for callers that do not care). */
export const SILENT_LOGGER: Logger = createLogger({ sink: () => {} });
