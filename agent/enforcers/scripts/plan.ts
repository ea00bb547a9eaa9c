/**
 * What a sync of the Scripts policies wants: each policy's signature checked against the CA certificate the agent
 * pinned at enrollment (`shared/scripts_signature.ts`) before anything of it is rendered, then its units, the
 * runner and the drop-ins that pull the units in.
 *
 * @module
 */

import type { ScriptsPolicy } from "../../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { verifyScriptsSignature } from "../../../shared/scripts_signature.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import type { Checked, DesktopPlan } from "../desktop_enforcer.ts";
import { RUN_SCRIPT, RUN_SCRIPT_PATH } from "./runner.ts";
import {
  isMachine,
  type RenderedScript,
  renderScriptUnit,
  SYSTEM_UNITS,
  SYSTEM_WANTS,
  USER_WANTS,
  wantsDropIn,
} from "./units.ts";

/** A policy whose signature checked out, rendered; or the reason it was refused. */
export interface PolicyPlan {
  refused?: string;
  scripts: RenderedScript[];
}

export interface ScriptsPlan extends DesktopPlan {
  byPolicy: Map<string, PolicyPlan>;
  /** Units managed before this sync that no policy wants any more (stopped after the reload). */
  withdrawn: string[];
}

/** The CA certificate the agent pinned at enrollment (a host path of the data directory). */
async function pinnedCa(io: EnforcerIO): Promise<string | undefined> {
  return await Deno.readTextFile(`${io.config.enrollment.dataDir}/ca.crt`).catch(() => undefined);
}

export async function planScripts(valid: Checked<ScriptsPolicy>[], io: EnforcerIO): Promise<ScriptsPlan> {
  const ca = await pinnedCa(io);
  const byPolicy = new Map<string, PolicyPlan>();
  const files = new Map<string, string>();
  const modes = new Map<string, number>([[RUN_SCRIPT_PATH, 0o755]]);
  const systemUnits: string[] = [];
  const userUnits: string[] = [];
  for (const { policy, message } of valid) {
    const refused = ca === undefined
      ? "the agent has no CA certificate to check the server's signature with (enroll again)"
      : await verifyScriptsSignature(ca, { id: policy.id, version: policy.version }, message);
    if (refused) {
      io.logger.warn("Scripts policy refused: its signature does not verify", { policy: policy.id, refused });
      byPolicy.set(policy.id, { refused, scripts: [] });
      continue;
    }
    const scripts = await Promise.all(message.scripts.map((s, i) => renderScriptUnit(policy, s, i)));
    for (const r of scripts) {
      files.set(r.path, r.text);
      if (isMachine(r.script)) {
        modes.set(r.path, 0o600);
        systemUnits.push(r.unit);
      } else userUnits.push(r.unit);
    }
    byPolicy.set(policy.id, { scripts });
  }
  if (files.size > 0) files.set(RUN_SCRIPT_PATH, RUN_SCRIPT);
  if (systemUnits.length) files.set(SYSTEM_WANTS, wantsDropIn(systemUnits));
  if (userUnits.length) files.set(USER_WANTS, wantsDropIn(userUnits));
  const withdrawn = io.managedPaths().filter((p) =>
    p.startsWith(`${SYSTEM_UNITS}/svc-script-`) && !files.has(p)
  )
    .map((p) => p.slice(SYSTEM_UNITS.length + 1));
  return { files, modes, byPolicy, withdrawn };
}
