/**
 * Which agents this server serves fully: the oldest agent release its policy stream and content messages
 * work with, and from which agent release each policy type is enforced. The node pages use it to say why a
 * node stays Pending (an agent too old, a type its agent does not know). Agent and server ship together
 * (same version), so today every type is enforced from the first release; a type added later names the
 * release that brings its enforcer here.
 */
import { getPolicyType } from "../../shared/policy_types/mod.ts";

/** The oldest agent release this server supports. */
export const MIN_AGENT_VERSION = "0.1.0";

/** The agent release that first enforces each type (absent: {@link MIN_AGENT_VERSION}). */
const TYPE_SINCE: Readonly<Record<string, string>> = {};

/** Numeric parts of a version such as `1.2.3` or `1.2.3-rc1+build` (pre-release and build ignored). */
function parts(version: string): number[] | undefined {
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)] : undefined;
}

/**
 * -1, 0 or 1 as `a` is older than, the same as or newer than `b`; undefined when either is not a version
 * (an agent that has not said which it is).
 */
export function compareVersions(a: string, b: string): number | undefined {
  const x = parts(a);
  const y = parts(b);
  if (!x || !y) return undefined;
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

/** True when `agentVersion` is known and older than the oldest supported agent. */
export function agentTooOld(agentVersion: string): boolean {
  return compareVersions(agentVersion, MIN_AGENT_VERSION) === -1;
}

/**
 * Why an agent of `agentVersion` does not enforce policies of `type`, or undefined when it does (or its
 * version is not known yet).
 */
export function unsupportedTypeReason(type: string, agentVersion: string): string | undefined {
  if (!getPolicyType(type)) {
    return `type ${type} is unknown to this server's release, so its agents have no enforcer for it`;
  }
  const since = TYPE_SINCE[type] ?? MIN_AGENT_VERSION;
  if (compareVersions(agentVersion, since) === -1) {
    return `agents enforce type ${type} from version ${since}; this one is ${agentVersion}`;
  }
  return undefined;
}
