/**
 * Shared pieces of the agent tests: a temp root that looks like a node (Firefox installed, an
 * original policies.json), an agent configuration pointing at it, and Firefox policies as the
 * sync engine caches them.
 */
import assert from "node:assert/strict";
import { create, type DescMessage, toJsonString } from "@bufbuild/protobuf";
import { FirefoxPolicySchema } from "../../shared/gen/svc/policy/v1/firefox_pb.ts";
import { type AgentConfig, buildAgentConfig } from "../../agent/config.ts";
import { RootFs } from "../../agent/fs.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import { SyncEngine, type SyncEngineOptions } from "../../agent/sync/engine.ts";
import type { CachedPolicy, Enforcer, EnforcerIO, PolicyResult } from "../../agent/sync/types.ts";
import { enforcerRegistry } from "../../agent/enforcers/mod.ts";
import { type TamperEvent, TamperWatcher } from "../../agent/tamper.ts";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createPolicyClient, type PolicyClient } from "../../agent/client.ts";
import type { AgentServer } from "../helpers/agents.ts";
import { writeEnrollment } from "../../agent/identity.ts";

/** The original policies.json a node had before svc. */
export const ORIGINAL_POLICIES = `{"policies": {"DisableAppUpdate": false}}\n`;

/** A temp node: `root` (with Firefox installed unless told otherwise) and `dataDir`. */
export interface TempNode {
  root: string;
  dataDir: string;
  config: AgentConfig;
  fs: RootFs;
  cleanup(): Promise<void>;
}

/** Creates a temp node. */
export async function tempNode(
  options: { firefox?: boolean; flatpak?: boolean; original?: string | null } = {},
): Promise<TempNode> {
  const base = await Deno.makeTempDir({ prefix: "svc-agent-test-" });
  const root = `${base}/root`;
  const dataDir = `${base}/data`;
  await Deno.mkdir(root);
  if (options.firefox ?? true) await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
  if (options.flatpak) {
    await Deno.mkdir(`${root}/var/lib/flatpak/app/org.mozilla.firefox`, { recursive: true });
  }
  const original = options.original === undefined ? ORIGINAL_POLICIES : options.original;
  if (original !== null) {
    await Deno.mkdir(`${root}/etc/firefox/policies`, { recursive: true });
    await Deno.writeTextFile(`${root}/etc/firefox/policies/policies.json`, original);
  }
  const { config } = buildAgentConfig(
    { agent: { root_dir: root, client_id: "node-1" }, enrollment: { data_dir: dataDir } },
    "test.yaml",
  );
  return {
    root,
    dataDir,
    config,
    fs: await RootFs.open(root),
    cleanup: () => Deno.remove(base, { recursive: true }),
  };
}

/** How a test's cached policy differs from the plain one (version 1, priority 0, typed, named by its id). */
export interface CachedPolicyOptions {
  name?: string;
  version?: number;
  priority?: number;
  /** Stored content other than the message's protojson (e.g. what the server could not parse). */
  content?: string;
  /** `false`: the server sent no parse of the content. */
  typed?: boolean;
}

/** A cached policy of any type as the sync engine caches it: `init` as protojson content and typed. */
export function cachedPolicy<D extends DescMessage>(
  schema: D,
  type: string,
  id: string,
  init: MessageInitShape<D>,
  options: CachedPolicyOptions = {},
): CachedPolicy {
  const message = create(schema, init);
  return {
    id,
    name: options.name ?? id,
    type,
    version: options.version ?? 1,
    priority: options.priority ?? 0,
    content: options.content ?? toJsonString(schema, message),
    typed: options.typed === false ? undefined : message,
  };
}

/**
 * A maker of cached policies of one type for a test file: ids `<idPrefix>-1`, `-2`, ... unless given, named
 * by `defaultName(id)` unless given.
 */
export function policyMaker<D extends DescMessage>(
  schema: D,
  type: string,
  idPrefix: string,
  defaultName: (id: string) => string = (id) => id,
): (init: MessageInitShape<D>, options?: CachedPolicyOptions & { id?: string }) => CachedPolicy {
  let counter = 0;
  return (init, options = {}) => {
    const id = options.id ?? `${idPrefix}-${++counter}`;
    return cachedPolicy(schema, type, id, init, { ...options, name: options.name ?? defaultName(id) });
  };
}

/** A cached Firefox policy with typed content. */
export const firefoxPolicy: (
  init: MessageInitShape<typeof FirefoxPolicySchema>,
  options?: CachedPolicyOptions & { id?: string },
) => CachedPolicy = policyMaker(FirefoxPolicySchema, "Firefox", "pol", (id) => `policy ${id}`);

/** A sync engine on a temp node with the real enforcers; collects compliance reports. */
export async function engineFor(
  node: TempNode,
  extra: Partial<SyncEngineOptions> = {},
): Promise<
  { engine: SyncEngine; reports: Map<string, PolicyResult>; managed: ManagedFiles; runner: Runner }
> {
  const reports = new Map<string, PolicyResult>();
  const managed = await ManagedFiles.load(node.dataDir, SILENT_LOGGER);
  const runner = extra.runner ?? new Runner();
  const engine = new SyncEngine({
    fs: node.fs,
    runner,
    logger: SILENT_LOGGER,
    config: node.config,
    managed,
    enforcers: enforcerRegistry(),
    reportCompliance: (policy, result) => {
      reports.set(policy.id, result);
      return Promise.resolve();
    },
    ...extra,
  });
  return { engine, reports, managed, runner };
}

/** Reads `/etc/firefox/policies/policies.json` under the node's root, parsed. */
export async function readFirefoxFile(node: TempNode): Promise<Record<string, unknown> | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(`${node.root}/etc/firefox/policies/policies.json`));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** The agent's own policy-port client (agent/client.ts) for an agent enrolled on a test server. */
export function agentPolicyClient(
  server: AgentServer,
  cert: { certPem: string; keyPem: string },
): PolicyClient {
  return createPolicyClient("localhost", server.policyPort, { ...cert, caPem: server.ctx.ca.certPem });
}

/**
 * A sync engine (as {@linkcode engineFor}) whose managed files a real TamperWatcher guards, wired as the
 * agent wires them: the engine tells the watcher its own writes and what it manages, a tamper asks for a
 * sync. `events` records each tamper once the restoring sync ran, or (`recordAtTamper`) as it is reported,
 * before the sync is asked for; `onTamper` replaces both.
 */
export async function watchedEngine(
  node: TempNode,
  options: {
    extra?: Partial<SyncEngineOptions>;
    settleMs?: number;
    recordAtTamper?: boolean;
    onTamper?: (event: TamperEvent, engine: SyncEngine) => Promise<void>;
  } = {},
): Promise<Awaited<ReturnType<typeof engineFor>> & { watcher: TamperWatcher; events: TamperEvent[] }> {
  const events: TamperEvent[] = [];
  // deno-lint-ignore prefer-const
  let watcher: TamperWatcher;
  const made = await engineFor(node, {
    onOwnWrite: (path, phase) => watcher.ownWrite(path, phase),
    onSynced: (summary) => watcher.setWatched(summary.managed),
    ...options.extra,
  });
  const { engine, managed } = made;
  watcher = new TamperWatcher({
    fs: node.fs,
    logger: SILENT_LOGGER,
    settleMs: options.settleMs,
    verify: (path) => managed.verify(node.fs, path),
    onTamper: options.onTamper
      ? (event) => options.onTamper!(event, engine)
      : options.recordAtTamper
      ? (event) => {
        events.push(event);
        return engine.requestSync();
      }
      : (event) => engine.requestSync(() => Promise.resolve(void events.push(event))),
  });
  return { ...made, watcher, events };
}

/**
 * Waits (up to 30 s) until `tampered()` says the edit was seen and the file at host path `path` reads `text`
 * again; the caller then asserts both.
 */
export async function untilRestored(
  engine: SyncEngine,
  path: string,
  text: string,
  tampered: () => boolean,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    await engine.idle();
    if (tampered() && (await Deno.readTextFile(path)) === text) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Hands the engine each of `contents` (protojson as a server that skipped validation would store it) as a
 * policy `h0`, `h1`, ... of `type` in one snapshot, waits for the sync, and asserts the agent refused each.
 */
export async function assertHostileRefused(
  engine: SyncEngine,
  reports: Map<string, PolicyResult>,
  type: string,
  contents: Record<string, unknown>[],
): Promise<void> {
  contents.forEach((content, i) =>
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: { id: `h${i}`, name: `h${i}`, type, version: 1, priority: 0, content: JSON.stringify(content) },
      snapshotComplete: i === contents.length - 1,
    })
  );
  await engine.idle();
  for (let i = 0; i < contents.length; i++) {
    const r = reports.get(`h${i}`)!;
    assert.equal(r.status, "ERROR", JSON.stringify(contents[i]));
    assert.match(r.message, /rejected by the agent/);
  }
}

/** An enforcer's IO on the node that fails the test if the enforcer writes or releases a file. */
export function noWritesIO(node: TempNode, runner: Runner): EnforcerIO {
  return {
    fs: node.fs,
    runner,
    logger: SILENT_LOGGER,
    config: node.config,
    managedPaths: () => [],
    writeManaged: () => Promise.reject(new Error("must not write")),
    releaseManaged: () => Promise.reject(new Error("must not release")),
  };
}

/** A temp node with KDE Plasma installed (its plasmashell marker), no Firefox and no original policies. */
export async function kdeNode(): Promise<TempNode> {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/usr/bin`, { recursive: true });
  await Deno.writeTextFile(`${node.root}/usr/bin/plasmashell`, "");
  return node;
}

/**
 * A Deno.test on a fresh node from `make`, cleaned up after `fn` however it ends; skipped when `ignore` (a
 * tool the test needs is missing).
 */
export function nodeTest<N extends { cleanup(): Promise<void> }>(
  name: string,
  options: { make: () => Promise<N>; ignore?: boolean },
  fn: (node: N) => Promise<void>,
): void {
  Deno.test({
    name,
    ignore: options.ignore ?? false,
    async fn() {
      const node = await options.make();
      try {
        await fn(node);
      } finally {
        await node.cleanup();
      }
    },
  });
}

/**
 * A sync engine on the node with only `enforcers`, handed `policies` as one complete snapshot (an empty one
 * when there are none) and waited on; answers the engine and what it reported.
 */
export async function syncWith(
  node: TempNode,
  enforcers: Enforcer[],
  policies: CachedPolicy[],
): ReturnType<typeof engineFor> {
  const ctx = await engineFor(node, { enforcers: new Map(enforcers.map((e) => [e.type, e])) });
  await syncSnapshot(ctx.engine, ...policies);
  return ctx;
}

/**
 * A node root under `base` (`base`/node) with a 20 MiB LUKS2 image at /images/disk.img unlocked by `key`
 * (PBKDF2 at 1000 iterations: fast to open, nothing to guard), and that key where the agent keeps it
 * (/etc/svc/luks-keys/UUID.key). Needs cryptsetup.
 */
export async function luksNode(
  runner: Runner,
  base: string,
  key: string,
): Promise<{ root: string; image: string; uuid: string }> {
  const root = `${base}/node`;
  await Deno.mkdir(`${root}/images`, { recursive: true });
  await Deno.mkdir(`${root}/etc/svc/luks-keys`, { recursive: true, mode: 0o700 });
  const image = `${root}/images/disk.img`;
  const f = await Deno.open(image, { create: true, write: true });
  await f.truncate(20 * 1024 * 1024);
  f.close();
  const fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
  const formatted = await runner.run(
    "cryptsetup",
    ["luksFormat", "--type", "luks2", ...fast, "-q", image, "--key-file=-"],
    { stdin: key },
  );
  assert.ok(formatted.success, formatted.stderr);
  const uuid = (await runner.run("cryptsetup", ["luksUUID", image])).stdout.trim();
  await Deno.writeTextFile(`${root}/etc/svc/luks-keys/${uuid}.key`, key, { mode: 0o600 });
  return { root, image, uuid };
}

/** The agent data directory `base`/agent-data (0700) holding an enrolled agent's identity. */
export async function enrolledDataDir(
  base: string,
  agent: { keyPem: string; certPem: string },
  server: AgentServer,
): Promise<string> {
  const dataDir = `${base}/agent-data`;
  await Deno.mkdir(dataDir, { recursive: true, mode: 0o700 });
  await writeEnrollment(dataDir, {
    keyPem: agent.keyPem,
    certPem: agent.certPem,
    caPem: server.ctx.ca.certPem,
  });
  return dataDir;
}

/** Hands the engine `policies` as one complete snapshot and waits until it has synced. */
export async function syncSnapshot(engine: SyncEngine, ...policies: CachedPolicy[]): Promise<void> {
  policies.forEach((policy, i) =>
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: i === policies.length - 1 })
  );
  if (policies.length === 0) engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
}
