/**
 * The Scripts type's bookkeeping on the node: the one runner every script unit calls (static text: nothing of a
 * policy is in it), and the done-files it writes, one per version of a script (its digest and run-again counter),
 * which the unit's condition reads to run each version once.
 *
 * @module
 */

import type { Script } from "../../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { ScriptInterpreter } from "../../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { sha256Hex } from "../../sync/managed_files.ts";

/** The marker in every file the Scripts type writes. */
export const SCRIPTS_MARKER =
  "# This file is managed by svc (Scripts); edits are overwritten by policy enforcement.";
/** Where svc's script state lives on the node. */
export const SCRIPTS_DIR = "/var/lib/svc-scripts";
/** The runner every script unit calls. */
export const RUN_SCRIPT_PATH = `${SCRIPTS_DIR}/svc-run-script`;
/** Done-files of machine scripts. */
export const MACHINE_DONE_DIR = `${SCRIPTS_DIR}/done`;
/** Done-files of user scripts, under each user's home. */
export const USER_DONE_DIR = ".local/state/svc-scripts";
/**
 * The runner (static text: nothing of a policy is in it). `$1` is the interpreter, `$2` the done-file, `$3` (shutdown
 * and logout) the unit file, whose absence means the unit was withdrawn while armed: then nothing runs.
 */
export const RUN_SCRIPT = `#!/bin/sh
${SCRIPTS_MARKER}
# Runs one svc script. Its systemd unit passes the script on standard input; it runs with the interpreter "$1"
# from a private temporary file, and its exit status and the unit's invocation id are recorded in "$2", which the
# unit's condition reads to run each version once.
set -u
interpreter="$1"
done_file="$2"
if [ -n "\${3:-}" ] && [ ! -e "$3" ]; then
  echo "svc: $3 was withdrawn; the script does not run"
  exit 0
fi
script="$(mktemp)" || exit 70
trap 'rm -f "$script"' EXIT
trap 'rm -f "$script"; exit 143' TERM INT
cat > "$script"
"$interpreter" "$script" < /dev/null
status=$?
mkdir -p "$(dirname "$done_file")" &&
  printf '%s %s\\n' "$status" "\${INVOCATION_ID:-}" > "$done_file.tmp" &&
  mv -f "$done_file.tmp" "$done_file"
exit "$status"
`;

export function interpreterPath(script: Script): string {
  return script.interpreter === ScriptInterpreter.SH ? "/bin/sh" : "/bin/bash";
}

/** The done-file name of one version of a script: its unit, the digest of interpreter and text, the counter. */
export async function doneName(base: string, script: Script): Promise<string> {
  const digest = (await sha256Hex(`${interpreterPath(script)}\n${script.body}`)).slice(0, 16);
  return `${base}-${digest}-r${script.runAgain}`;
}

export /** A done-file's content: `<exit status> <invocation id>`. */
function parseDone(text: string | undefined): { code: number; invocation: string } | undefined {
  const m = /^(\d{1,3}) ([0-9a-f]{32})?\s*$/.exec(text ?? "");
  return m ? { code: Number(m[1]), invocation: m[2] ?? "" } : undefined;
}
