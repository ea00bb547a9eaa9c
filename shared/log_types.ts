/**
 * The logger's types, shared by the server's logger (server/core/log.ts) and the agent's
 * (agent/log.ts). Each side keeps its own line formatting (the agent quotes text details that hold
 * spaces, the server writes them raw); only the interface and the level/format names are one.
 *
 * @module
 */

/** Log levels in increasing severity. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Line formats (`log.format`). */
export type LogFormat = "text" | "json";
/** Every line format. */
export const LOG_FORMATS: readonly LogFormat[] = ["text", "json"];

/** A logger. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}
