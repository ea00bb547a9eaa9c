/**
 * Plain line logger with levels: a line a person can read with key=value details (`text`, the default),
 * or one JSON object per line for journald/Loki pipelines (`json`: `time`, `level`, `msg`, then the
 * details; a detail named like one of those gets a trailing `_`).
 */

import type { LogFormat, Logger, LogLevel } from "../../shared/log_types.ts";
export { LOG_FORMATS } from "../../shared/log_types.ts";
export type { LogFormat, Logger, LogLevel } from "../../shared/log_types.ts";

const ORDER: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

const RESERVED = new Set(["time", "level", "msg"]);

function plain(value: unknown): unknown {
  return value instanceof Error ? value.message : value;
}

/** One log line in `format`. */
export function formatLogLine(
  format: LogFormat,
  entry: { time: Date; level: LogLevel; msg: string; fields?: Record<string, unknown> },
): string {
  const fields = Object.entries(entry.fields ?? {}).filter(([, v]) => v !== undefined);
  if (format === "json") {
    const out: Record<string, unknown> = {
      time: entry.time.toISOString(),
      level: entry.level,
      msg: entry.msg,
    };
    for (const [k, v] of fields) out[RESERVED.has(k) ? `${k}_` : k] = plain(v);
    return JSON.stringify(out);
  }
  const extra = fields.map(([k, v]) => {
    const value = plain(v);
    return ` ${k}=${typeof value === "string" ? value : JSON.stringify(value)}`;
  }).join("");
  return `${entry.time.toISOString()} ${entry.level.toUpperCase()} ${entry.msg}${extra}`;
}

/** Creates a logger writing to `sink` (default stderr) at or above `level`, in `options.format`. */
export function createLogger(
  level: LogLevel = "info",
  sink: (line: string) => void = (l) => console.error(l),
  options: { format?: LogFormat } = {},
): Logger {
  const format = options.format ?? "text";
  const emit = (at: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[at] < ORDER[level]) return;
    sink(formatLogLine(format, { time: new Date(), level: at, msg, fields }));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}
