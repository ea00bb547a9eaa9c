/**
 * Counts the repeated code people wrote, leaving out what a generator wrote (protobuf, the REST client,
 * the embedded SPA) and the browser policy catalogue (data kept as TypeScript): those repeat by design and
 * would drown the pairs a person can fold into one piece. It copies the hand-written files into a
 * temporary folder and runs the machine's `duplicates` tool there, so the tool's own count is the
 * hand-written count. `deno task duplicates:hand [--only PREFIX]... [--skip PREFIX]... [--most N]`.
 */
import { dirname, join } from "node:path";

/** Paths (from the repository root) whose code a generator writes or that hold catalogue data. */
export const NOT_HAND_WRITTEN: readonly RegExp[] = [
  /\.gen\.ts$/,
  /_pb\.ts$/,
  /^agent\/gen\//,
  /^shared\/gen\//,
  /^proto\//,
  /^shared\/policy_types\/browser_catalogue\//,
  /^web\/dist\//,
];

/** Whether a repository path is code a person wrote (and so counts in the duplicates measure). */
export function isHandWritten(path: string): boolean {
  return !NOT_HAND_WRITTEN.some((pattern) => pattern.test(path));
}

/** Which hand-written paths to measure: all, or only those under `only`, less those under `skip`. */
export function selectPaths(
  paths: readonly string[],
  options: { only?: readonly string[]; skip?: readonly string[] } = {},
): string[] {
  const only = options.only ?? [];
  const skip = options.skip ?? [];
  return paths.filter((path) =>
    isHandWritten(path) &&
    (only.length === 0 || only.some((prefix) => path.startsWith(prefix))) &&
    !skip.some((prefix) => path.startsWith(prefix))
  );
}

async function run(command: string, args: string[], cwd: string): Promise<string> {
  const output = await new Deno.Command(command, { args, cwd, stdout: "piped", stderr: "inherit" }).output();
  if (!output.success) throw new Error(`${command} ${args.join(" ")} failed in ${cwd}`);
  return new TextDecoder().decode(output.stdout);
}

function parseArgs(args: string[]): { only: string[]; skip: string[]; most: string } {
  const parsed = { only: [] as string[], skip: [] as string[], most: "40" };
  for (let i = 0; i < args.length; i++) {
    const value = args[i + 1];
    if (value === undefined || !["--only", "--skip", "--most"].includes(args[i])) {
      throw new Error(
        `duplicates_hand: cannot read "${
          args[i]
        }"; use --only PREFIX, --skip PREFIX (each repeatable) or --most N`,
      );
    }
    if (args[i] === "--only") parsed.only.push(value);
    else if (args[i] === "--skip") parsed.skip.push(value);
    else parsed.most = value;
    i++;
  }
  return parsed;
}

if (import.meta.main) {
  const options = parseArgs(Deno.args);
  const root = (await run("git", ["rev-parse", "--show-toplevel"], Deno.cwd())).trim();
  const listed = (await run("git", ["ls-files", "--cached", "--others", "--exclude-standard"], root))
    .split("\n").filter((path) => path !== "");
  const copy = await Deno.makeTempDir({ prefix: "svc-duplicates-hand-" });
  try {
    for (const path of selectPaths(listed, options)) {
      try {
        await Deno.mkdir(join(copy, dirname(path)), { recursive: true });
        await Deno.copyFile(join(root, path), join(copy, path));
      } catch (error) {
        if (!(error instanceof Deno.errors.NotFound)) throw error; // deleted in the working tree
      }
    }
    console.log(
      (await run("duplicates", ["--repo", copy, "--seconds", "300", "--most", options.most], copy)).trimEnd(),
    );
  } finally {
    await Deno.remove(copy, { recursive: true });
  }
}
