/**
 * Runs the build's external tools (npm, tar, dpkg-deb, rpmbuild, gpg, apt-ftparchive, createrepo_c):
 * fixed argument vectors, never a shell, and an error that names the command and shows its output.
 *
 * @module
 */

/** Options for {@link run}. */
export interface ExecOptions {
  cwd?: string;
  env?: Record<string, string>;
  stdin?: Uint8Array | string;
  /** Do not echo stderr on success. */
  quiet?: boolean;
}

/** Runs `cmd args`; returns stdout; throws with stderr when the command fails. */
export async function run(cmd: string, args: string[], options: ExecOptions = {}): Promise<string> {
  const bytes = await runBytes(cmd, args, options);
  return new TextDecoder().decode(bytes);
}

/** Like {@link run} but returns stdout as bytes. */
export async function runBytes(cmd: string, args: string[], options: ExecOptions = {}): Promise<Uint8Array> {
  let child;
  try {
    child = new Deno.Command(cmd, {
      args,
      cwd: options.cwd,
      env: options.env,
      stdin: options.stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new Error(`${cmd} is not installed; the build needs it (see README "Packaging")`);
    }
    throw err;
  }
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(
      typeof options.stdin === "string" ? new TextEncoder().encode(options.stdin) : options.stdin,
    );
    await writer.close();
  }
  const out = await child.output();
  if (!out.success) {
    const err = new TextDecoder().decode(out.stderr).trim();
    throw new Error(`${cmd} ${args.join(" ")} failed (exit ${out.code}):\n${err}`);
  }
  return out.stdout;
}
