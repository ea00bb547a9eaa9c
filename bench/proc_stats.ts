/**
 * Processor time and memory read from Linux's /proc, for the benchmarks: a process's own figures, the sum over
 * every process of one program (PostgreSQL's backends), and the whole machine's busy time, so a benchmark can
 * say where the processor time of a run went when clients, server and database share one machine.
 */

/** Clock ticks per second of /proc's CPU fields (USER_HZ; 100 on every Linux build that matters here). */
const TICKS_PER_SECOND = 100;

/** The fields after the command name of /proc/PID/stat (the name may hold spaces and parentheses). */
async function statFields(pid: number | string): Promise<string[]> {
  const text = await Deno.readTextFile(`/proc/${pid}/stat`);
  return text.slice(text.lastIndexOf(") ") + 2).split(" ");
}

/** CPU seconds (user + system) and RSS of a process. */
export async function processStats(pid: number): Promise<{ cpu: number; rssMiB: number }> {
  const stat = await statFields(pid);
  const ticks = Number(stat[11]) + Number(stat[12]);
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { cpu: ticks / TICKS_PER_SECOND, rssMiB: rssKiB / 1024 };
}

/** Every process id, with its stat fields; processes that end while being read are left out. */
async function allProcesses(): Promise<{ pid: number; comm: string; stat: string[] }[]> {
  const out = [];
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const text = await Deno.readTextFile(`/proc/${entry.name}/stat`);
      const comm = text.slice(text.indexOf("(") + 1, text.lastIndexOf(")"));
      out.push({ pid: Number(entry.name), comm, stat: text.slice(text.lastIndexOf(") ") + 2).split(" ") });
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/** Direct children of `pid` (the policy workers of a server process). */
export async function childPids(pid: number): Promise<number[]> {
  return (await allProcesses()).filter((p) => Number(p.stat[1]) === pid).map((p) => p.pid);
}

/**
 * CPU seconds used so far by the live processes named `comm` (e.g. "postgres": its backends, WAL writer and
 * checkpointer). A difference of two readings is the program's CPU over the interval as long as its processes
 * outlive it (pooled connections do); a process that ended in between takes its time with it.
 */
export async function programCpu(comm: string): Promise<number> {
  const ticks = (await allProcesses()).filter((p) => p.comm === comm)
    .reduce((sum, p) => sum + Number(p.stat[11]) + Number(p.stat[12]), 0);
  return ticks / TICKS_PER_SECOND;
}

/** The machine's busy and total CPU seconds so far, summed over its processors (from /proc/stat). */
export async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await Deno.readTextFile("/proc/stat")).split("\n")[0];
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(
    Number,
  );
  const busy = user + nice + system + irq + softirq + steal;
  return { busy: busy / TICKS_PER_SECOND, total: (busy + idle + iowait) / TICKS_PER_SECOND };
}

/**
 * Ends with SIGKILL those of `pids` that still run (a server's policy workers left behind when their server
 * was stopped: a worker whose shutdown hangs outlives its supervisor), and says how many there were.
 */
export function killSurvivors(pids: readonly number[]): number {
  let killed = 0;
  for (const pid of pids) {
    try {
      Deno.kill(pid, "SIGKILL");
      killed++;
    } catch { /* gone already */ }
  }
  return killed;
}
