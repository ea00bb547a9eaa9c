/**
 * What svc added to the system installation, recorded in `{data_dir}/state/flatpak.json` so it takes back only
 * that: remotes it added, or adopted with their previous settings, and every ref that appeared during an install
 * it made (the app and the runtimes it pulled).
 *
 * @module
 */

import { readFileIfExists, writeFileAtomic } from "../../fs.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import { flatpakStatePath } from "../state_file.ts";
import type { RemoteSettings } from "./cli.ts";

/** See the module documentation. */
export interface FlatpakState {
  version: 1;
  /** Remote name → added by svc, or adopted with its previous settings. */
  remotes: Record<string, { added: true } | { added: false; original: RemoteSettings }>;
  /** Full refs (`app/…`, `runtime/…`) that appeared during installs svc made. */
  refs: string[];
}

/** A record of nothing. */
export function emptyState(): FlatpakState {
  return { version: 1, remotes: {}, refs: [] };
}

/** The record; an unreadable one is logged and taken as empty (svc forgets what it added). */
export async function loadState(io: EnforcerIO): Promise<FlatpakState> {
  const bytes = await readFileIfExists(flatpakStatePath(io));
  if (!bytes) return emptyState();
  try {
    const parsed = JSON.parse(new TextDecoder().decode(bytes)) as FlatpakState;
    if (parsed.version !== 1 || typeof parsed.remotes !== "object" || !Array.isArray(parsed.refs)) {
      throw new Error("unknown layout");
    }
    return parsed;
  } catch (err) {
    io.logger.error("Flatpak state is unreadable; svc forgets what it added", {
      file: flatpakStatePath(io),
      error: (err as Error).message,
    });
    return emptyState();
  }
}

/** Writes the record (refs sorted, without duplicates), readable by root only. */
export async function saveState(io: EnforcerIO, state: FlatpakState): Promise<void> {
  state.refs = [...new Set(state.refs)].sort();
  await writeFileAtomic(flatpakStatePath(io), `${JSON.stringify(state, null, 2)}\n`, {
    mode: 0o600,
    dirMode: 0o700,
  });
}

/** Whether svc added nothing. */
export function isEmptyState(state: FlatpakState): boolean {
  return Object.keys(state.remotes).length === 0 && state.refs.length === 0;
}
