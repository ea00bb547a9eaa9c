/**
 * REST routes of the Flatpak catalogue: repositories (list, register, refresh now, upload AppStream,
 * delete; Settings permissions) and application search for the policy editor (policy:view).
 */
import type { ServerContext } from "../../context.ts";
import {
  createRepo,
  CREDENTIALS_REFUSED,
  deleteRepo,
  fetchLimits,
  getRepo,
  hasCredentials,
  listRepos,
  MAX_FLATPAKREPO_BYTES,
  parseFlatpakRepo,
  refreshRepo,
  searchCatalog,
  uploadAppstream,
  withoutUrlCredentials,
} from "../../flatpak/catalogue.ts";
import { FetchRefused } from "../../flatpak/safe_fetch.ts";
import { badRequest, HttpError } from "../errors.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { auditResource, body, type RouteSpec, uuidParam } from "../route.ts";
import type { RawBodyRoute } from "../openapi.ts";
import { DATE_TIME, noContent, TEXT_PATTERN } from "./common.ts";
import { flatpakRoute as route } from "./tags.ts";
import { readCapped } from "../body_limit.ts";

const REPO_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  name: { type: "string" },
  title: { type: "string" },
  source: { type: "string", enum: ["url", "upload"] },
  url: { type: "string" },
  gpg_key: { type: "string" },
  arch: { type: "string" },
  last_attempt_at: { type: ["string", "null"], format: "date-time" },
  last_success_at: { type: ["string", "null"], format: "date-time" },
  last_error: { type: "string" },
  app_count: { type: "integer" },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
});

const HIT_SCHEMA: JsonSchema = objectSchema({
  app_id: { type: "string" },
  name: { type: "string" },
  summary: { type: "string" },
  icon_url: { type: "string" },
  versions: { type: "array", items: { type: "string" } },
  repo: { type: "string" },
});

async function readLimited(request: Request, max: number): Promise<Uint8Array> {
  if (!request.body) throw badRequest("upload an appstream.xml or appstream.xml.gz as the request body");
  return await readCapped(
    request.body,
    max,
    () =>
      new HttpError(
        413,
        "payload_too_large",
        `the upload is larger than ${max} bytes (flatpak.catalog_max_bytes)`,
      ),
  );
}

/** Routes of the Flatpak catalogue. */
export function flatpakRoutes(ctx: ServerContext): RouteSpec[] {
  const { db } = ctx;
  const upload: RouteSpec & RawBodyRoute = route(
    "POST /api/v1/flatpak/repos/:id/appstream",
    "settings:edit",
    {
      summary:
        "Upload the AppStream catalogue (appstream.xml or .xml.gz) of an upload repository (air-gapped sites)",
      audit: { resourceType: "flatpak_repo", action: "flatpak_repo.upload" },
      rawBody: {
        description: "appstream.xml, plain or gzip-compressed",
        contentTypes: ["application/xml", "application/gzip", "application/octet-stream"],
      },
      responses: { "200": { description: "The repository after indexing", schema: REPO_SCHEMA } },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const bytes = await readLimited(c.req.raw, ctx.config.flatpak.catalogMaxBytes);
        const repo = await uploadAppstream(db, id, bytes, ctx.config.flatpak.catalogMaxBytes);
        auditResource(c, { id, name: repo.name });
        c.set("auditDetails", { apps: repo.app_count, bytes: bytes.length });
        return c.json(repo);
      },
    },
  );
  return [
    route("GET /api/v1/flatpak/repos", "settings:view", {
      summary: "List the Flatpak catalogue repositories with their refresh state",
      responses: {
        "200": {
          description: "Repositories",
          schema: objectSchema({ items: { type: "array", items: REPO_SCHEMA } }),
        },
      },
      handler: async (c) => c.json({ items: await listRepos(db) }),
    }),
    route("POST /api/v1/flatpak/repos", "settings:edit", {
      summary:
        "Register a repository: its URL (OSTree repository or appstream.xml(.gz) file), a .flatpakrepo file or URL, or upload=true for AppStream uploads",
      audit: { resourceType: "flatpak_repo" },
      body: closedObject({
        name: { type: "string", pattern: "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$" },
        title: { type: "string", maxLength: 256, pattern: TEXT_PATTERN },
        url: { type: "string", maxLength: 2048, pattern: "^https?://" },
        flatpakrepo: { type: "string", maxLength: MAX_FLATPAKREPO_BYTES, pattern: TEXT_PATTERN },
        gpg_key: { type: "string", maxLength: 65536, pattern: "^[A-Za-z0-9+/=\\s]*$" },
        arch: { type: "string", pattern: "^[a-z0-9_]{1,16}$" },
        upload: { type: "boolean" },
      }, ["name"]),
      responses: { "201": { description: "The repository", schema: REPO_SCHEMA } },
      handler: async (c) => {
        const input = body<{
          name: string;
          title?: string;
          url?: string;
          flatpakrepo?: string;
          gpg_key?: string;
          arch?: string;
          upload?: boolean;
        }>(c);
        // The audit row copies the body: a URL with credentials is refused, but its password must not stay.
        c.set("body", {
          ...input,
          ...(input.url ? { url: withoutUrlCredentials(input.url) } : {}),
          ...(input.flatpakrepo ? { flatpakrepo: withoutUrlCredentials(input.flatpakrepo) } : {}),
        });
        const urlOfFile = input.flatpakrepo ? parseFlatpakRepo(input.flatpakrepo).url : "";
        for (const [field, url] of [["url", input.url ?? ""], ["flatpakrepo", urlOfFile]]) {
          if (hasCredentials(url)) {
            throw badRequest(`${field}: the repository URL ${CREDENTIALS_REFUSED}`, [
              { field, message: CREDENTIALS_REFUSED },
            ]);
          }
        }
        if (!input.upload && !input.url && !input.flatpakrepo) {
          throw badRequest("give url, flatpakrepo, or upload=true", [
            { field: "url", message: "give the repository URL, a .flatpakrepo file, or upload=true" },
          ]);
        }
        let repo;
        try {
          repo = await createRepo(db, {
            name: input.name,
            title: input.title,
            url: input.url,
            flatpakrepo: input.flatpakrepo,
            gpgKey: input.gpg_key,
            arch: input.arch,
            upload: input.upload,
          }, fetchLimits(ctx, 30_000));
        } catch (err) {
          if (err instanceof FetchRefused) throw badRequest(`url: ${err.message}`);
          throw err;
        }
        auditResource(c, { id: repo.id, name: repo.name });
        return c.json(repo, 201);
      },
    }),
    route("POST /api/v1/flatpak/repos/:id/refresh", "settings:edit", {
      summary:
        "Refresh a URL repository now; answers with the outcome (ok, unchanged or error) and the repository",
      audit: { resourceType: "flatpak_repo", action: "flatpak_repo.refresh" },
      responses: {
        "200": {
          description: "Outcome and repository",
          schema: objectSchema({
            outcome: { type: "string", enum: ["ok", "unchanged", "error"] },
            error: { type: "string", description: "What went wrong, when the outcome is error" },
            repo: REPO_SCHEMA,
          }, { optional: ["error"] }),
        },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const result = await refreshRepo(db, id, fetchLimits(ctx));
        const repo = await getRepo(db, id);
        auditResource(c, { id, name: repo.name });
        c.set("auditDetails", { outcome: result.outcome });
        return c.json({ ...result, repo });
      },
    }),
    upload,
    route("DELETE /api/v1/flatpak/repos/:id", "settings:edit", {
      summary: "Delete a repository and its indexed applications",
      audit: { resourceType: "flatpak_repo" },
      responses: { "204": { description: "Deleted" } },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const repo = await db.transaction((tx) => deleteRepo(tx, id));
        auditResource(c, { id, name: repo.name });
        return noContent(c);
      },
    }),
    route("GET /api/v1/flatpak/apps", "policy:view", {
      summary: "Search the catalogue by application id, name or summary",
      query: {
        q: { type: "string", maxLength: 200 },
        limit: { type: "integer", minimum: 1, maximum: 200 },
      },
      responses: {
        "200": {
          description: "Matching applications",
          schema: objectSchema({ items: { type: "array", items: HIT_SCHEMA } }),
        },
      },
      handler: async (c) =>
        c.json({
          items: await searchCatalog(db, c.req.query("q") ?? "", Number(c.req.query("limit") ?? 50)),
        }),
    }),
  ];
}
