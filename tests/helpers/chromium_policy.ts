/**
 * Asks Debian's real Chromium which managed policies it loads from a directory, without touching the host's /etc.
 *
 * How it works (verified with Chromium 156.0.8078.79, Debian bookworm):
 * - `unshare --mount --propagation private --pid --fork --mount-proc --kill-child=SIGKILL` (plus
 *   `--user --map-root-user` when not root) gives Chromium a private mount and PID namespace. Inside it a tmpfs
 *   is mounted over `/etc/chromium/policies` (or over `/etc/chromium`, refilled with a copy of its files, when the
 *   `policies` directory does not exist on the host, because a mount point cannot be created without writing to
 *   the host's /etc), `managed/` is created in that tmpfs and `managedDir` is bind-mounted onto it. The host's
 *   `recommended/` directory, if any, is hidden too, so only `managedDir` feeds the loader.
 * - `/usr/bin/chromium` (Debian's launcher script, which sources /etc/chromium.d and execs
 *   /usr/lib/chromium/chromium) runs headless with `--remote-debugging-port=0`; the endpoint is parsed from the
 *   `DevTools listening on ws://…` line on stderr and `puppeteer-core` connects to it.
 * - On `chrome://policy` the page's WebUI bridge is used directly: `cr.webUIListenerCallback` (the function the
 *   browser calls to deliver events) is wrapped, `chrome.send("reloadPolicies")` makes the loader re-read the
 *   directory, and the next `policies-updated` event carries the very data the page renders; its second argument
 *   holds `policyGroups.chrome.policies`, one record per key (see {@link ChromiumPolicyRecord}).
 * - Chromium is the init process of its PID namespace and `--kill-child` ties it to `unshare`, so killing
 *   `unshare` kills every Chromium process; nothing survives the helper.
 *
 * Environmental gaps (not Linux, no Chromium, no /etc/chromium, no `unshare`, namespaces or mounts refused)
 * return `{ ok: false, skipReason }`. Failures after Chromium started (crash, no DevTools endpoint, a changed
 * chrome://policy contract, timeout) throw, so a broken pipeline never passes as a skip.
 */
import puppeteer, { type Browser } from "puppeteer-core";

/** One policy as chrome://policy reports it. Extra keys Chromium may add are kept as they come. */
export interface ChromiumPolicyRecord {
  /** The value as parsed from the JSON file (real JSON types, not display strings). */
  value: unknown;
  /** `mandatory` for `managed/`, `recommended` for `recommended/`. */
  level: string;
  /** `machine` for files under /etc. */
  scope: string;
  /** `platform` for files under /etc. */
  source: string;
  /** Why Chromium ignores the value, e.g. `Unknown policy.`, `Expected boolean value.`, `Value is out of range 9.` */
  error?: string;
  /** A non-fatal note, e.g. that a conflicting value from another file was overridden. */
  warning?: string;
  /** Values from other files for the same key that lost (the alphabetically last file wins). */
  conflicts?: Array<{ value: unknown; level: string; scope: string; source: string }>;
  [extra: string]: unknown;
}

/** What {@link loadPoliciesWithRealChromium} found. */
export type ChromiumPolicyResult =
  | { ok: true; policies: Record<string, ChromiumPolicyRecord> }
  | { ok: false; skipReason: string };

/** Options for {@link loadPoliciesWithRealChromium}. */
export interface ChromiumPolicyOptions {
  /** Budget for start-up, page load and policy reload together (default 20 000 ms). */
  timeoutMs?: number;
  /** The Chromium launcher to run (default `/usr/bin/chromium`). */
  chromiumPath?: string;
}

const POLICIES_DIR = "/etc/chromium/policies";
const CHROMIUM_ETC = "/etc/chromium";
const NS_ENTERED = "svc-ns-entered";
const MOUNT_FAILED = "svc-mount-failed:";
const DEVTOOLS_LINE = /DevTools listening on (ws:\/\/\S+)/;
const STDERR_LIMIT = 256 * 1024;

// Runs inside the namespaces. Paths arrive as positional parameters, never spliced into the script text.
const NAMESPACE_SCRIPT = `
fail() { echo "${MOUNT_FAILED} $1" >&2; exit 97; }
echo ${NS_ENTERED} >&2
managed=$1; stash=$2; shift 2
if [ -d ${POLICIES_DIR} ]; then
  mount -t tmpfs -o mode=0755 svc-policies ${POLICIES_DIR} || fail "tmpfs over ${POLICIES_DIR}"
else
  mount --bind ${CHROMIUM_ETC} "$stash" || fail "bind ${CHROMIUM_ETC} to a stash directory"
  mount -t tmpfs -o mode=0755 svc-chromium-etc ${CHROMIUM_ETC} || fail "tmpfs over ${CHROMIUM_ETC}"
  cp -R --preserve=mode,timestamps "$stash/." ${CHROMIUM_ETC}/ || fail "copy ${CHROMIUM_ETC} into the tmpfs"
  mkdir ${POLICIES_DIR} || fail "mkdir ${POLICIES_DIR} in the tmpfs"
fi
mkdir ${POLICIES_DIR}/managed || fail "mkdir ${POLICIES_DIR}/managed in the tmpfs"
mount --bind "$managed" ${POLICIES_DIR}/managed || fail "bind the managed directory onto ${POLICIES_DIR}/managed"
exec "$@"
`;

/**
 * Starts Debian's real Chromium headless with `/etc/chromium/policies/managed` replaced by `managedDir` (in a
 * private mount namespace; the host's /etc is never written) and returns the policies chrome://policy shows.
 *
 * @param managedDir absolute path of an existing directory holding the `*.json` policy files to load
 * @returns `{ ok: true, policies }` keyed by policy name, or `{ ok: false, skipReason }` when this machine cannot run
 *   the check; throws when the check ran and failed
 */
export async function loadPoliciesWithRealChromium(
  managedDir: string,
  options: ChromiumPolicyOptions = {},
): Promise<ChromiumPolicyResult> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const chromiumPath = options.chromiumPath ?? "/usr/bin/chromium";
  if (!managedDir.startsWith("/")) {
    throw new Error(`managedDir must be an absolute path, got "${managedDir}"`);
  }
  const info = await Deno.stat(managedDir).catch(() => null);
  if (!info?.isDirectory) {
    throw new Error(`managedDir "${managedDir}" is not an existing directory; create it first`);
  }

  const skipReason = await missingPrerequisite(chromiumPath);
  if (skipReason) return { ok: false, skipReason };

  const deadline = Date.now() + timeoutMs;
  const tmp = await Deno.makeTempDir({ prefix: "svc-chromium-" });
  let child: Deno.ChildProcess | undefined;
  let stderr: StderrWatch | undefined;
  let browser: Browser | undefined;
  try {
    for (const dir of ["profile", "home", "stash"]) await Deno.mkdir(`${tmp}/${dir}`);
    const unshareArgs = [
      ...(Deno.uid() === 0 ? [] : ["--user", "--map-root-user"]),
      "--mount",
      "--propagation",
      "private",
      "--pid",
      "--fork",
      "--mount-proc",
      "--kill-child=SIGKILL",
    ];
    const chromiumArgs = [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--remote-debugging-port=0",
      `--user-data-dir=${tmp}/profile`,
      "about:blank",
    ];
    child = new Deno.Command("unshare", {
      args: [
        ...unshareArgs,
        ...["sh", "-c", NAMESPACE_SCRIPT, "svc-chromium-ns", managedDir, `${tmp}/stash`],
        ...[chromiumPath, ...chromiumArgs],
      ],
      // Chromium writes ~/.pki/nssdb, XDG caches and shared-memory files; keep all of them in the temp dir.
      env: {
        HOME: `${tmp}/home`,
        XDG_CONFIG_HOME: `${tmp}/home/.config`,
        XDG_CACHE_HOME: `${tmp}/home/.cache`,
        TMPDIR: tmp,
      },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    stderr = watchStderr(child.stderr);
    const started = await waitForDevTools(child, stderr, deadline);
    if ("skipReason" in started) return { ok: false, skipReason: started.skipReason };

    browser = await beforeDeadline(
      puppeteer.connect({ browserWSEndpoint: started.endpoint, defaultViewport: null }),
      deadline,
      "the DevTools connection",
    );
    const page = await browser.newPage();
    await beforeDeadline(page.goto("chrome://policy"), deadline, "chrome://policy to load");
    const policies = await page.evaluate(reloadAndCapture, Math.max(1, deadline - Date.now()));
    if (policies === null || typeof policies !== "object") {
      throw new Error("chrome://policy sent policies-updated without policyGroups.chrome.policies");
    }
    return { ok: true, policies: policies as Record<string, ChromiumPolicyRecord> };
  } catch (err) {
    const tail = stderr ? `\nChromium stderr (tail):\n${stderrTail(stderr.text())}` : "";
    throw new Error(`real Chromium policy check failed: ${(err as Error).message}${tail}`, { cause: err });
  } finally {
    // A hung browser must not stall cleanup for puppeteer's 180 s protocol timeout; the kill below is what counts.
    if (browser) await beforeDeadline(browser.close(), Date.now() + 3000, "Browser.close").catch(() => {});
    if (child) await stopNamespace(child);
    await stderr?.done;
    await Deno.remove(tmp, { recursive: true });
  }
}

/** Runs inside chrome://policy: reload policies from disk and resolve with the next policies-updated payload. */
function reloadAndCapture(timeoutMs: number): Promise<unknown> {
  // deno-lint-ignore no-explicit-any -- the WebUI globals have no types outside Chromium's source tree
  const w = globalThis as any;
  return new Promise((resolve, reject) => {
    const cr = w.cr;
    if (typeof cr?.webUIListenerCallback !== "function" || typeof w.chrome?.send !== "function") {
      reject(
        new Error(
          "chrome://policy has no cr.webUIListenerCallback / chrome.send; the WebUI contract changed",
        ),
      );
      return;
    }
    const original = cr.webUIListenerCallback;
    const timer = setTimeout(() => {
      cr.webUIListenerCallback = original;
      reject(new Error(`no policies-updated event within ${timeoutMs} ms of chrome.send("reloadPolicies")`));
    }, timeoutMs);
    cr.webUIListenerCallback = (name: string, ...args: unknown[]) => {
      if (name === "policies-updated") {
        clearTimeout(timer);
        cr.webUIListenerCallback = original;
        // deno-lint-ignore no-explicit-any -- see above
        resolve((args[1] as any)?.policyGroups?.chrome?.policies ?? null);
      }
      return original(name, ...args);
    };
    w.chrome.send("reloadPolicies");
  });
}

/** Why this machine cannot run the check, or undefined when it can try. */
async function missingPrerequisite(chromiumPath: string): Promise<string | undefined> {
  if (Deno.build.os !== "linux") return `mount namespaces need Linux, this is ${Deno.build.os}`;
  const chromium = await Deno.stat(chromiumPath).catch(() => null);
  if (!chromium?.isFile) return `${chromiumPath} not found (install it: apt-get install -y chromium)`;
  const etc = await Deno.stat(CHROMIUM_ETC).catch(() => null);
  if (!etc?.isDirectory) {
    return `${CHROMIUM_ETC} does not exist, so there is no mount point to shadow without writing to the host's /etc`;
  }
  try {
    await new Deno.Command("unshare", { args: ["--version"], stdout: "null", stderr: "null" }).output();
  } catch {
    return "unshare (util-linux) is not on PATH";
  }
  return undefined;
}

interface StderrWatch {
  text(): string;
  endpoint(): string | undefined;
  nsEntered(): boolean;
  mountFailed(): boolean;
  /** Resolves at the next chunk or at end of stream. */
  next(): Promise<void>;
  done: Promise<void>;
}

function watchStderr(stream: ReadableStream<Uint8Array>): StderrWatch {
  let text = "";
  let endpoint: string | undefined;
  let nsEntered = false;
  let mountFailed = false;
  let wake = () => {};
  let changed = new Promise<void>((r) => (wake = r));
  const done = (async () => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      // Markers are checked before trimming so one split across chunks is still seen.
      nsEntered ||= text.includes(NS_ENTERED);
      mountFailed ||= text.includes(MOUNT_FAILED);
      endpoint ??= text.match(DEVTOOLS_LINE)?.[1];
      text = text.slice(-STDERR_LIMIT);
      wake();
      changed = new Promise<void>((r) => (wake = r));
    }
    wake();
  })();
  return {
    text: () => text,
    endpoint: () => endpoint,
    nsEntered: () => nsEntered,
    mountFailed: () => mountFailed,
    next: () => changed,
    done,
  };
}

async function waitForDevTools(
  child: Deno.ChildProcess,
  stderr: StderrWatch,
  deadline: number,
): Promise<{ endpoint: string } | { skipReason: string }> {
  let exitCode: number | undefined;
  const exited = child.status.then((s) => {
    exitCode = s.code;
  });
  while (true) {
    const endpoint = stderr.endpoint();
    if (endpoint) return { endpoint };
    if (exitCode !== undefined) {
      await stderr.done;
      const text = stderr.text().trim();
      if (!stderr.nsEntered()) {
        return {
          skipReason: `unshare could not create the namespaces (exit ${exitCode}): ${stderrTail(text)}`,
        };
      }
      if (stderr.mountFailed()) {
        return { skipReason: `mounting inside the namespace was refused: ${stderrTail(text)}` };
      }
      throw new Error(`Chromium exited with ${exitCode} before printing its DevTools endpoint`);
    }
    await beforeDeadline(Promise.race([stderr.next(), exited]), deadline, "Chromium's DevTools endpoint");
  }
}

/** Kills `unshare`; `--kill-child` then kills Chromium, the namespace's init, and with it every process in it. */
async function stopNamespace(child: Deno.ChildProcess): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const graceful = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), 3000);
    child.status.then(() => resolve(true));
  });
  const exited = await graceful;
  clearTimeout(timer);
  if (!exited) {
    try {
      child.kill("SIGKILL");
    } catch { /* exited meanwhile */ }
  }
  await child.status;
}

async function beforeDeadline<T>(work: Promise<T>, deadline: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out waiting for ${what}`)),
      Math.max(0, deadline - Date.now()),
    );
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The last lines of Chromium's stderr without its D-Bus noise (there is no bus in a test namespace). */
function stderrTail(text: string): string {
  return text.split("\n").filter((line) => line.trim() && line !== NS_ENTERED && !line.includes("dbus/"))
    .slice(-20)
    .join("\n");
}
