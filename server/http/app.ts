/**
 * The web port's HTTP application (everything that is not gRPC): security headers → error mapping → CSRF →
 * declared REST routes (authentication, permission, validation, audit) → agent repository → SPA fallback.
 * A fetch handler, so tests call `app.fetch(new Request(...))` in-process.
 */
import { Hono } from "hono";
import type { ServerContext } from "../context.ts";
import { errorBody, HttpError, toHttpError } from "./errors.ts";
import { securityHeaders } from "./security_headers.ts";
import { csrfProtection } from "./csrf.ts";
import { type AppEnv, mountRoutes, type RouteHooks, type RouteSpec } from "./route.ts";
import { agentRepoFor } from "./agent_repo.ts";

/** What the app is assembled from. */
export interface AppParts {
  ctx: ServerContext;
  routes: readonly RouteSpec[];
  hooks: RouteHooks;
  /** Serves non-API paths (the SPA); absent → 404 JSON. */
  spa?: (req: Request) => Response | Promise<Response>;
  /** Serves `/agent/*` beyond `ca.crt`; default: the repository in `agent_repo.dir` (agent_repo.ts). */
  agentRepo?: (req: Request) => Response | Promise<Response>;
}

/** Builds the Hono app. */
export function createApp(parts: AppParts): Hono<AppEnv> {
  const { ctx } = parts;
  const app = new Hono<AppEnv>();
  app.use("*", securityHeaders());
  // Full storage refuses every write until an operator frees space: say so in the log, once a minute at most.
  let storageFullLoggedAt = -Infinity;
  app.onError((err, c) => {
    const mapped = toHttpError(err);
    if (mapped?.code === "storage_full" && performance.now() - storageFullLoggedAt > 60_000) {
      storageFullLoggedAt = performance.now();
      ctx.log.error(
        "storage full: writes are refused until space is freed on the database's disk or the data directory",
        {
          dataDir: ctx.config.server.dataDir,
          method: c.req.method,
          path: c.req.path,
          error: String(err),
        },
      );
    }
    if (mapped) {
      const res = c.json(errorBody(mapped), mapped.status as 400);
      for (const [k, v] of Object.entries(mapped.headers ?? {})) res.headers.set(k, v);
      return res;
    }
    ctx.log.error("http: unhandled error", { method: c.req.method, path: c.req.path, error: String(err) });
    if (err instanceof Error && err.stack) ctx.log.debug(err.stack);
    return c.json({
      error: { code: "internal", message: "internal server error; the server log has details" },
    }, 500);
  });
  app.use("/api/*", csrfProtection());
  mountRoutes(app, parts.routes, parts.hooks);
  app.all("/api/*", (c) => {
    throw new HttpError(404, "not_found", `no API route ${c.req.method} ${c.req.path}`);
  });
  app.get("/agent/ca.crt", (c) =>
    c.body(ctx.ca.certPem, 200, {
      "Content-Type": "application/x-pem-file",
      "Content-Disposition": 'attachment; filename="ca.crt"',
    }));
  app.all("/agent/*", (c) => (parts.agentRepo ?? agentRepoFor(ctx).handle)(c.req.raw));
  app.all("*", (c) => {
    if (parts.spa && (c.req.method === "GET" || c.req.method === "HEAD")) return parts.spa(c.req.raw);
    throw new HttpError(404, "not_found", `nothing at ${c.req.path}`);
  });
  return app;
}
