/**
 * What KDE programs read of svc's keys: with KDE's own reader `kreadconfig5`/`kreadconfig6` where installed
 * (XDG_CONFIG_DIRS pointing at the written directory, a scratch HOME whose user file tries to override every
 * immutable key), with the shared parser otherwise.
 *
 * @module
 */

import { type KconfigGroup, parseKconfigFile, renderKconfigFile } from "../../../shared/kconfig_format.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import { withScratchDir } from "../scratch.ts";
import { KDE_SYSTEM_DIR, type KdeKey } from "./render.ts";

const PROBE = "svc-immutability-probe";

/** A key as read back, or why it could not be. */
export type KdeReading = string | { value: string; immutable: boolean };

function stripNewline(text: string): string {
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

/** Reads every written key back; see the module documentation. */
export async function readKdeKeys<W extends KdeKey>(
  io: EnforcerIO,
  winners: readonly W[],
): Promise<Map<W, KdeReading>> {
  const out = new Map<W, KdeReading>();
  const reader = await io.runner.which("kreadconfig5") ?? await io.runner.which("kreadconfig6");
  const parsed = new Map<string, ReturnType<typeof parseKconfigFile> | string>();
  for (const w of winners) {
    if (parsed.has(w.path)) continue;
    const text = await io.fs.readTextFile(w.path).catch((err) => `cannot read: ${(err as Error).message}`);
    parsed.set(w.path, text === undefined ? "the file is missing after the write" : parseKconfigFile(text));
  }
  const own = (w: W) => {
    const file = parsed.get(w.path)!;
    if (typeof file === "string") return file;
    const found = file.get(w.group.join("\u0000"))?.get(w.key);
    return found ?? "the key is missing from the written file";
  };
  if (!reader) {
    for (const w of winners) out.set(w, own(w));
    return out;
  }
  return await withScratchDir("svc-kconfig-read-", async (scratch) => {
    // A user configuration that tries to override every immutable key of the /etc/xdg files.
    const probes = new Map<string, KconfigGroup[]>();
    for (const w of winners) {
      if (!w.immutable || !w.path.startsWith(`${KDE_SYSTEM_DIR}/`)) continue;
      const name = w.path.slice(KDE_SYSTEM_DIR.length + 1);
      probes.set(name, [...(probes.get(name) ?? []), {
        path: w.group,
        keys: [{ key: w.key, value: PROBE, immutable: false }],
      }]);
    }
    await Deno.mkdir(`${scratch}/config`, { recursive: true });
    for (const [name, groups] of probes) {
      await Deno.writeTextFile(`${scratch}/config/${name}`, renderKconfigFile("probe", groups));
    }
    const env = {
      XDG_CONFIG_DIRS: await io.fs.resolve(KDE_SYSTEM_DIR),
      XDG_CONFIG_HOME: `${scratch}/config`,
      HOME: scratch,
      QT_QPA_PLATFORM: "offscreen",
    };
    for (const w of winners) {
      const system = w.path.startsWith(`${KDE_SYSTEM_DIR}/`);
      const file = system ? w.path.slice(KDE_SYSTEM_DIR.length + 1) : await io.fs.resolve(w.path);
      const args = ["--file", file, ...w.group.flatMap((g) => ["--group", g]), "--key", w.key];
      const result = await io.runner.run(reader, args, { env, clearEnv: true, timeoutMs: 30_000 });
      if (!result.success) {
        out.set(w, `${reader} failed: ${(result.stderr || result.stdout).trim().slice(0, 500)}`);
        continue;
      }
      const value = stripNewline(result.stdout);
      const ownView = own(w);
      // kreadconfig reads absolute files without cascading, so [$i] there is checked in the file itself.
      const immutable = system
        ? w.immutable && value !== PROBE
        : typeof ownView !== "string" && ownView.immutable;
      out.set(w, { value, immutable: w.immutable ? immutable : false });
    }
    return out;
  });
}
