/**
 * What the dev-time catalogue generators (gen_gsettings_catalogue.ts, gen_polkit_catalogue.ts) share: the
 * `--root` argument, the output of a system command, and the Debian package versions and release they record
 * as the catalogue's source.
 *
 * @module
 */

/** The trimmed standard output of `cmd args`, or "" when it fails (a package that is not installed). */
export async function commandText(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).output();
  return out.success ? new TextDecoder().decode(out.stdout).trim() : "";
}

/** The directory given with `--root` (a mounted image), default `/`. */
export function rootArgument(args: readonly string[] = Deno.args): string {
  const at = args.indexOf("--root");
  return at >= 0 ? args[at + 1] : "/";
}

/** The installed version of the Debian package `pkg`, or "" when it is not installed. */
export function packageVersion(pkg: string): Promise<string> {
  return commandText("dpkg-query", ["-W", "-f", "${Version}", pkg]);
}

/** `<ID> <VERSION_CODENAME>` of this machine's /etc/os-release, or `unknown`. */
export async function osRelease(): Promise<string> {
  return (await commandText("sh", ["-c", '. /etc/os-release && echo "$ID $VERSION_CODENAME"'])) || "unknown";
}
