/**
 * The Flatpak catalogue: repositories administrators register (a repository URL, a `.flatpakrepo` file
 * or URL, or an uploaded `appstream.xml(.gz)` for air-gapped sites) and the applications indexed from
 * their AppStream data, searchable by id, name and summary for the policy editor.
 *
 * A URL repository is refreshed on a schedule (`flatpak.catalog_refresh_minutes`): its AppStream is read
 * from the `appstream2/<arch>` branch (or `appstream/<arch>`) of the OSTree repository, or fetched
 * directly when the URL names an `.xml`/`.xml.gz` file, always through {@linkcode safeFetch}. Each
 * attempt counts in `svc_flatpak_catalog_refresh_total{repo,outcome}` (`ok`, `unchanged` when the
 * document is byte-identical, `error`, `upload`); the metrics collector reads the apps and the last
 * success from the tables.
 *
 * @module
 */

import type { Db, Queryable } from "../db/db.ts";
import type { ServerContext } from "../context.ts";
import { conflictError, found, invalidError } from "../core/errors.ts";
import { flatpakCatalogRefresh } from "../metrics/counters.ts";
import { type AppstreamDocument, readAppstream } from "./appstream.ts";
import { readRootFile, resolveRef } from "./ostree.ts";
import { type FetchLimits, safeFetch } from "./safe_fetch.ts";

/** A repository as the REST API shows it. */
export interface FlatpakRepoRecord {
  id: string;
  name: string;
  title: string;
  source: "url" | "upload";
  url: string;
  gpg_key: string;
  arch: string;
  last_attempt_at: string | null;
  last_success_at: string | null;
  last_error: string;
  app_count: number;
  created_at: string;
  updated_at: string;
}

/** One search hit. */
export interface CatalogHit {
  app_id: string;
  name: string;
  summary: string;
  icon_url: string;
  versions: string[];
  repo: string;
}

const COLUMNS =
  `r.id, r.name, r.title, r.source, r.url, r.gpg_key, r.arch, r.last_attempt_at, r.last_success_at,
  r.last_error, r.created_at, r.updated_at,
  (SELECT count(*)::int FROM flatpak_catalog_apps a WHERE a.repo_id = r.id) AS app_count`;

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Fetch limits from the configuration. */
export function fetchLimits(ctx: ServerContext, timeoutMs = 60_000): FetchLimits {
  return {
    allowPrivate: ctx.config.flatpak.catalogAllowPrivateTargets,
    maxBytes: ctx.config.flatpak.catalogMaxBytes,
    timeoutMs,
  };
}

/**
 * Largest `.flatpakrepo` file read, fetched or in a request body: real ones are a few KiB (a GPG key in
 * base64 and a few lines), and parsing runs on the event loop.
 */
export const MAX_FLATPAKREPO_BYTES = 64 * 1024;

/** The `[Flatpak Repo]` keys of a `.flatpakrepo` file (one pass over its lines). */
export function parseFlatpakRepo(text: string): { url: string; gpgKey: string; title: string } {
  const keys = new Map<string, string>();
  let inGroup = false;
  for (let start = 0; start <= text.length;) {
    const newline = text.indexOf("\n", start);
    const end = newline < 0 ? text.length : newline;
    const line = text.slice(start, end).trim();
    start = end + 1;
    if (line.startsWith("[")) inGroup = line === "[Flatpak Repo]";
    else if (inGroup && !line.startsWith("#")) {
      const eq = line.indexOf("=");
      if (eq >= 0) keys.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
    }
  }
  const url = keys.get("Url");
  if (!url) throw invalidError("flatpakrepo: the file has no Url key in a [Flatpak Repo] group");
  return { url, gpgKey: keys.get("GPGKey") ?? "", title: keys.get("Title") ?? "" };
}

function checkUrl(url: string, field: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidError(`${field}: "${url}" is not a URL`, [{ field, message: "must be an http(s) URL" }]);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw invalidError(`${field}: only http and https URLs can be fetched`, [
      { field, message: "must be an http(s) URL" },
    ]);
  }
  if (hasCredentials(url)) {
    throw invalidError(`${field}: the repository URL ${CREDENTIALS_REFUSED}`, [{
      field,
      message: CREDENTIALS_REFUSED,
    }]);
  }
}

/**
 * Why a URL with credentials is refused, and the fix. Stored URLs are shown to everyone with settings:view and
 * land in audit rows; a password has no place there, and the catalogue fetches anonymously anyway.
 */
export const CREDENTIALS_REFUSED =
  "must not contain credentials (user:password@): remove them; repositories " +
  "are read anonymously, so publish the AppStream data without a login or upload it instead";

/** Whether `url` parses and names a user or password. */
export function hasCredentials(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.username !== "" || parsed.password !== "";
  } catch {
    return false;
  }
}

/**
 * `text` with the credentials of any URL in it removed (`https://user:pw@host` → `https://host`): records
 * stored before URLs with credentials were refused, and error messages that quote such a URL, are shown so.
 */
export function withoutUrlCredentials(text: string): string {
  return text.replace(/:\/\/[^/@\s]*@/g, "://");
}

function shown(record: FlatpakRepoRecord): FlatpakRepoRecord {
  return {
    ...record,
    url: withoutUrlCredentials(record.url),
    last_error: withoutUrlCredentials(record.last_error),
  };
}

/** Lists the repositories. */
export async function listRepos(q: Queryable): Promise<FlatpakRepoRecord[]> {
  return (await q.query<FlatpakRepoRecord>(`SELECT ${COLUMNS} FROM flatpak_repos r ORDER BY r.name`)).map(
    shown,
  );
}

/** One repository. */
export async function getRepo(q: Queryable, id: string): Promise<FlatpakRepoRecord> {
  const [row] = await q.query<FlatpakRepoRecord>(`SELECT ${COLUMNS} FROM flatpak_repos r WHERE r.id = $1`, [
    id,
  ]);
  return shown(found(row, `Flatpak repository ${id}`));
}

/** Input of {@linkcode createRepo}. */
export interface CreateRepoInput {
  name: string;
  title?: string;
  /** Repository (or AppStream file) URL; or `.flatpakrepo` content / a `.flatpakrepo` URL instead. */
  url?: string;
  flatpakrepo?: string;
  gpgKey?: string;
  arch?: string;
  /** An `upload` repository is filled by {@linkcode uploadAppstream} only. */
  upload?: boolean;
}

/** Registers a repository (fetching a `.flatpakrepo` URL first when given one). */
export async function createRepo(
  q: Queryable,
  input: CreateRepoInput,
  limits: FetchLimits,
): Promise<FlatpakRepoRecord> {
  if (!NAME_RE.test(input.name)) {
    throw invalidError(
      "name: letters, digits, '.', '_' and '-' (up to 64), starting with a letter or digit",
      [
        { field: "name", message: "letters, digits, '.', '_' and '-' (up to 64)" },
      ],
    );
  }
  let url = input.url ?? "";
  let gpgKey = input.gpgKey ?? "";
  let title = input.title ?? "";
  // The field the stored URL came from, for the error that refuses it.
  let field = "url";
  if (input.flatpakrepo) {
    const repo = parseFlatpakRepo(input.flatpakrepo);
    url = repo.url;
    gpgKey ||= repo.gpgKey;
    title ||= repo.title;
    field = "flatpakrepo";
  } else if (url.endsWith(".flatpakrepo")) {
    checkUrl(url, "url");
    const bytes = await safeFetch(url, {
      ...limits,
      maxBytes: Math.min(limits.maxBytes, MAX_FLATPAKREPO_BYTES),
    });
    if (!bytes) throw invalidError(`url: ${url} was not found`);
    const repo = parseFlatpakRepo(new TextDecoder().decode(bytes));
    url = repo.url;
    gpgKey ||= repo.gpgKey;
    title ||= repo.title;
    field = "url";
  }
  if (!input.upload || url) checkUrl(url, field);
  const exists = await q.query("SELECT 1 FROM flatpak_repos WHERE name = $1", [input.name]);
  if (exists.length) throw conflictError(`a Flatpak repository named ${input.name} exists already`);
  const [row] = await q.query<{ id: string }>(
    `INSERT INTO flatpak_repos (name, title, source, url, gpg_key, arch) VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING id`,
    [input.name, title.slice(0, 256), input.upload ? "upload" : "url", url, gpgKey, input.arch ?? "x86_64"],
  );
  return await getRepo(q, row.id);
}

/** Deletes a repository and its indexed applications. */
export async function deleteRepo(q: Queryable, id: string): Promise<FlatpakRepoRecord> {
  const repo = await getRepo(q, id);
  await q.query("DELETE FROM flatpak_repos WHERE id = $1", [id]);
  return repo;
}

/** Replaces the indexed applications of a repository; returns "unchanged" for an identical document. */
async function index(db: Db, repoId: string, document: AppstreamDocument): Promise<"ok" | "unchanged"> {
  const { apps, sha256: digest } = document;
  const [current] = await db.query<{ appstream_sha256: string }>(
    "SELECT appstream_sha256 FROM flatpak_repos WHERE id = $1",
    [repoId],
  );
  if (current?.appstream_sha256 === digest) {
    await db.query(
      "UPDATE flatpak_repos SET last_attempt_at = now(), last_success_at = now(), last_error = '' WHERE id = $1",
      [repoId],
    );
    return "unchanged";
  }
  await db.transaction(async (tx) => {
    await tx.query("DELETE FROM flatpak_catalog_apps WHERE repo_id = $1", [repoId]);
    for (let i = 0; i < apps.length; i += 500) {
      const batch = apps.slice(i, i + 500);
      const params: unknown[] = [repoId];
      const values = batch.map((app) => {
        params.push(app.appId, app.name, app.summary, app.iconUrl, app.versions);
        const n = params.length;
        return `($1, $${n - 4}, $${n - 3}, $${n - 2}, $${n - 1}, $${n})`;
      });
      await tx.query(
        `INSERT INTO flatpak_catalog_apps (repo_id, app_id, name, summary, icon_url, versions) VALUES ${
          values.join(", ")
        }`,
        params,
      );
    }
    await tx.query(
      `UPDATE flatpak_repos SET appstream_sha256 = $2, last_attempt_at = now(), last_success_at = now(),
         last_error = '', updated_at = now() WHERE id = $1`,
      [repoId, digest],
    );
  });
  return "ok";
}

/** Reads a URL repository's AppStream document (bytes, gzip or not). */
async function fetchAppstream(repo: FlatpakRepoRecord, limits: FetchLimits): Promise<Uint8Array> {
  const base = repo.url.replace(/\/+$/, "");
  if (/\.xml(\.gz)?$/.test(base)) {
    const bytes = await safeFetch(repo.url, limits);
    if (!bytes) throw new Error(`${repo.url} was not found`);
    return bytes;
  }
  const get = (path: string) => safeFetch(`${base}/${path}`, limits);
  for (
    const [ref, file] of [[`appstream2/${repo.arch}`, "appstream.xml"], [
      `appstream/${repo.arch}`,
      "appstream.xml.gz",
    ]]
  ) {
    const commit = await resolveRef(get, ref);
    if (!commit) continue;
    const bytes = await readRootFile(get, commit, file, limits.maxBytes);
    if (bytes) return bytes;
  }
  throw new Error(`${repo.url} publishes no appstream2/${repo.arch} or appstream/${repo.arch} branch`);
}

/** Refreshes one URL repository; records the outcome and counts it. Never throws. */
export async function refreshRepo(
  db: Db,
  id: string,
  limits: FetchLimits,
): Promise<{ outcome: "ok" | "unchanged" | "error"; error?: string }> {
  const repo = await getRepo(db, id);
  if (repo.source !== "url") {
    throw conflictError(`${repo.name} is filled by uploads; upload a new appstream.xml`);
  }
  try {
    const bytes = await fetchAppstream(repo, limits);
    const outcome = await index(db, repo.id, await readAppstream(bytes, { maxBytes: limits.maxBytes }));
    flatpakCatalogRefresh.inc({ repo: repo.name, outcome });
    return { outcome };
  } catch (err) {
    const message = withoutUrlCredentials((err as Error).message).slice(0, 1000);
    await db.query("UPDATE flatpak_repos SET last_attempt_at = now(), last_error = $2 WHERE id = $1", [
      repo.id,
      message,
    ]);
    flatpakCatalogRefresh.inc({ repo: repo.name, outcome: "error" });
    return { outcome: "error", error: message };
  }
}

/** Indexes an uploaded `appstream.xml(.gz)` for an `upload` repository. */
export async function uploadAppstream(
  db: Db,
  id: string,
  bytes: Uint8Array,
  maxBytes: number,
): Promise<FlatpakRepoRecord> {
  const repo = await getRepo(db, id);
  if (repo.source !== "upload") {
    throw conflictError(
      `${repo.name} is refreshed from its URL; register an upload repository for AppStream files`,
    );
  }
  let document: AppstreamDocument;
  try {
    document = await readAppstream(bytes, { maxBytes });
  } catch (err) {
    flatpakCatalogRefresh.inc({ repo: repo.name, outcome: "error" });
    throw invalidError(`the upload is not a usable AppStream catalogue: ${(err as Error).message}`);
  }
  await index(db, repo.id, document);
  flatpakCatalogRefresh.inc({ repo: repo.name, outcome: "upload" });
  return await getRepo(db, id);
}

/** Searches the indexed applications by id, name or summary (case-insensitive substring). */
export async function searchCatalog(q: Queryable, text: string, limit = 50): Promise<CatalogHit[]> {
  const like = `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return await q.query<CatalogHit>(
    `SELECT a.app_id, a.name, a.summary, a.icon_url, a.versions, r.name AS repo
       FROM flatpak_catalog_apps a JOIN flatpak_repos r ON r.id = a.repo_id
      WHERE lower(a.app_id) LIKE $1 OR lower(a.name) LIKE $1 OR lower(a.summary) LIKE $1
      ORDER BY (lower(a.app_id) = $2 OR lower(a.name) = $2) DESC, a.name, a.app_id
      LIMIT $3`,
    [like, text.toLowerCase(), limit],
  );
}

/**
 * Starts the scheduled refresh: every minute, URL repositories whose last attempt is older than
 * `flatpak.catalog_refresh_minutes` are refreshed one after another (0 turns the schedule off).
 * Returns the stop function.
 */
export function startCatalogueRefresh(ctx: ServerContext, tickMs = 60_000): () => Promise<void> {
  const minutes = ctx.config.flatpak.catalogRefreshMinutes;
  if (minutes <= 0) return () => Promise.resolve();
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = (async () => {
      const due = await ctx.db.query<{ id: string }>(
        `SELECT id FROM flatpak_repos WHERE source = 'url'
           AND (last_attempt_at IS NULL OR last_attempt_at < now() - make_interval(mins => $1))
         ORDER BY name`,
        [minutes],
      );
      for (const { id } of due) await refreshRepo(ctx.db, id, fetchLimits(ctx));
    })().catch((err) => ctx.log.warn("flatpak catalogue: scheduled refresh failed", { error: String(err) }));
  }, tickMs);
  return async () => {
    clearInterval(timer);
    await running;
  };
}
