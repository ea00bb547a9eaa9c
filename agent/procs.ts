/**
 * Which processes hold a file: every `/proc/<pid>/fd/*` link that points at it (also after
 * the file was replaced, when the kernel appends " (deleted)"), and every process whose
 * command line names it. Used for tamper reports; processes that vanish mid-scan or that
 * the agent may not inspect are skipped.
 *
 * @module
 */

/** A process found holding a file. */
export interface HolderProcess {
  pid: number;
  /** Command name from `/proc/<pid>/comm`. */
  comm: string;
  /** User name of the real UID, or the numeric UID when it has no name. */
  user: string;
}

/** Options of {@linkcode findFileHolders}. */
export interface FindHoldersOptions {
  /** Where procfs is mounted; default `/proc`. */
  procRoot?: string;
  /** passwd file for UID → name; default `/etc/passwd`. */
  passwdFile?: string;
  /** Leave this process out (the agent itself); default `Deno.pid`. */
  excludePid?: number;
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return undefined;
  }
}

async function userNames(passwdFile: string): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const line of (await readText(passwdFile) ?? "").split("\n")) {
    const fields = line.split(":");
    if (fields.length >= 3 && !names.has(fields[2])) names.set(fields[2], fields[0]);
  }
  return names;
}

async function holdsByFd(procDir: string, target: string): Promise<boolean> {
  try {
    for await (const entry of Deno.readDir(`${procDir}/fd`)) {
      let link: string;
      try {
        link = await Deno.readLink(`${procDir}/fd/${entry.name}`);
      } catch {
        continue;
      }
      if (link === target || link === `${target} (deleted)`) return true;
    }
  } catch {
    // Gone, or not ours to read.
  }
  return false;
}

async function namesInCmdline(procDir: string, target: string): Promise<boolean> {
  const cmdline = await readText(`${procDir}/cmdline`);
  if (!cmdline) return false;
  const args = cmdline.split("\0").slice(1).filter((a) => a !== "");
  if (args.includes(target)) return true;
  const relative = args.filter((a) => !a.startsWith("/") && !a.startsWith("-"));
  if (relative.length === 0) return false;
  let cwd: string;
  try {
    cwd = await Deno.readLink(`${procDir}/cwd`);
  } catch {
    return false;
  }
  return relative.some((a) => `${cwd}/${a}`.replace(/\/\.\//g, "/") === target);
}

/** Lists the processes that have `hostPath` open or name it on their command line. */
export async function findFileHolders(
  hostPath: string,
  options: FindHoldersOptions = {},
): Promise<HolderProcess[]> {
  const procRoot = options.procRoot ?? "/proc";
  const exclude = options.excludePid ?? Deno.pid;
  const names = await userNames(options.passwdFile ?? "/etc/passwd");
  const found: HolderProcess[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(procRoot));
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry.name)) continue;
    const pid = Number(entry.name);
    if (pid === exclude || pid > 0x7fffffff) continue;
    const procDir = `${procRoot}/${entry.name}`;
    if (!(await holdsByFd(procDir, hostPath)) && !(await namesInCmdline(procDir, hostPath))) continue;
    const comm = (await readText(`${procDir}/comm`))?.trim() ?? "";
    const uid = /^Uid:\s+(\d+)/m.exec(await readText(`${procDir}/status`) ?? "")?.[1] ?? "";
    found.push({ pid, comm, user: names.get(uid) ?? uid });
  }
  return found.sort((a, b) => a.pid - b.pid);
}
