/**
 * `deno task start` run as an operator runs it, on free ports, with what it prints on stdout and on stderr
 * kept apart: tests of a first start read each stream line by line. Waiting for the login box wakes on
 * every chunk printed, not on a timer.
 */
import { freePort } from "./process.ts";

/** A running `deno task start`. */
export interface StartedTask {
  ports: { web: number; policy: number; metrics: number };
  stdout(): string;
  stderr(): string;
  /** Both streams, labelled: what a failure message shows. */
  output(): string;
  /**
   * Waits until the bottom line of the login box ends stdout, the task ends, or `deadlineMs` passes (the
   * caller asserts what it finds).
   */
  loginBox(deadlineMs: number): Promise<void>;
  /** SIGTERM, then waits for the process and the end of its output. */
  stop(): Promise<void>;
}

/** The bottom line of the login box, the last thing a start prints. */
export const LOGIN_BOX_END = /└─+┘\s*$/;

/**
 * Spawns `deno <args>` (with `task start` in them) in `cwd`, on free enrollment, policy and metrics ports
 * given through the environment, plus `env`.
 */
export function startTask(
  options: { args: string[]; cwd?: string; env?: Record<string, string> },
): StartedTask {
  const ports = { web: freePort(), policy: freePort(), metrics: freePort() };
  const child = new Deno.Command(Deno.execPath(), {
    args: options.args,
    cwd: options.cwd,
    env: {
      NO_COLOR: "1",
      SVC_SERVER_ENROLLMENT_PORT: String(ports.web),
      SVC_SERVER_POLICY_PORT: String(ports.policy),
      SVC_METRICS_ADDR: `127.0.0.1:${ports.metrics}`,
      ...options.env,
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const text = { stdout: "", stderr: "" };
  let exited = false;
  // Settled (and replaced) whenever something is printed or the task ends.
  let wake!: () => void;
  let changed = new Promise<void>((r) => wake = r);
  const notify = () => {
    const settle = wake;
    changed = new Promise<void>((r) => wake = r);
    settle();
  };
  const pump = async (name: "stdout" | "stderr", stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      text[name] += chunk;
      notify();
    }
  };
  const pumps = Promise.all([pump("stdout", child.stdout), pump("stderr", child.stderr)]);
  child.status.then(() => {
    exited = true;
    notify();
  });
  return {
    ports,
    stdout: () => text.stdout,
    stderr: () => text.stderr,
    output: () => `stdout:\n${text.stdout}\nstderr:\n${text.stderr}`,
    async loginBox(deadlineMs: number) {
      const deadline = Date.now() + deadlineMs;
      while (!LOGIN_BOX_END.test(text.stdout) && !exited && Date.now() < deadline) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([changed, new Promise((r) => timer = setTimeout(r, deadline - Date.now()))]);
        clearTimeout(timer);
      }
    },
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already ended */ }
      await child.status;
      await pumps;
    },
  };
}
