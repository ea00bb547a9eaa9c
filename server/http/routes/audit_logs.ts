/** `GET /api/v1/audit-logs` (filtered, paginated) and `GET /api/v1/audit-logs/export` (CSV or JSON). */
import type { ServerContext } from "../../context.ts";
import { badRequest } from "../errors.ts";
import { type JsonSchema, objectSchema } from "../json_schema.ts";
import { PAGE_QUERY, pageRequest, pageSchema } from "../pagination.ts";
import { callerEvent, queryTime, type RouteContext, type RouteSpec } from "../route.ts";
import {
  type AuditFilter,
  type AuditLogRow,
  iterateAuditLogs,
  listAuditLogs,
  MAX_OFFSET_ROWS,
} from "../../audit/audit_logs.ts";
import { csvLine } from "../../audit/csv.ts";
import { withAuditNames } from "../../audit/audit_names.ts";
import { auditRoute as route } from "./tags.ts";

const FILTER_QUERY: Record<string, JsonSchema> = {
  action: { type: "string", maxLength: 1000, description: "Action, or several separated by commas" },
  resource_type: {
    type: "string",
    maxLength: 1000,
    description: "Resource type, or several separated by commas",
  },
  resource_id: { type: "string", maxLength: 200 },
  user: { type: "string", maxLength: 200, description: "Username (exact) or user id" },
  outcome: { type: "string", enum: ["success", "failure", "denied"] },
  from: { type: "string", maxLength: 40, description: "Earliest time (inclusive), RFC 3339" },
  to: { type: "string", maxLength: 40, description: "Latest time (exclusive), RFC 3339" },
};

/**
 * Keyset paging: the `next_cursor` of the page before. Rows are then read after it at the same cost at any
 * depth, and rows written meanwhile neither repeat nor shift the pages (`page` is ignored).
 */
const CURSOR_QUERY: JsonSchema = {
  type: "string",
  pattern: "^[1-9][0-9]{0,18}$",
  description:
    "The next_cursor of the previous page (keyset paging; page is then ignored). Page numbers reach the newest 10,000 entries; deeper pages are read by cursor",
};

const ROW_SCHEMA: JsonSchema = objectSchema({
  id: { type: "integer" },
  created_at: { type: "string" },
  user_id: { type: ["string", "null"] },
  username: { type: "string" },
  node_id: { type: ["string", "null"] },
  action: { type: "string" },
  resource_type: { type: "string" },
  resource_id: { type: "string" },
  resource_name: { type: "string" },
  outcome: { type: "string", enum: ["success", "failure", "denied"] },
  source_ip: { type: "string" },
  details: {
    type: "object",
    description:
      "What the action did; changes of an edit as `changes: {field: {from, to}}` (lists as {added, removed}, policy contents by setting)",
  },
  names: {
    type: "object",
    description:
      "Current name and type of every id the entry mentions that still exists (resource, node, user, ids in details); a deleted thing's id is absent",
    additionalProperties: objectSchema({ type: { type: "string" }, name: { type: "string" } }),
  },
});

const CSV_HEADER = [
  "id",
  "created_at",
  "username",
  "user_id",
  "action",
  "outcome",
  "resource_type",
  "resource_id",
  "resource_name",
  "source_ip",
  "node_id",
  "details",
];

function list(value: string | undefined): string[] | undefined {
  const items = value?.split(",").map((s) => s.trim()).filter((s) => s !== "");
  return items?.length ? items : undefined;
}

function filterOf(c: RouteContext): AuditFilter {
  return {
    actions: list(c.req.query("action")),
    resourceTypes: list(c.req.query("resource_type")),
    resourceId: c.req.query("resource_id") || undefined,
    user: c.req.query("user") || undefined,
    outcome: c.req.query("outcome") || undefined,
    from: queryTime(c, "from"),
    to: queryTime(c, "to"),
  };
}

/** The audit log routes. */
export function auditLogRoutes(ctx: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/audit-logs", "audit_log:view", {
      summary: "List audit log entries, newest first",
      query: { ...FILTER_QUERY, ...PAGE_QUERY, cursor: CURSOR_QUERY },
      responses: {
        "200": {
          description: "A page of entries",
          schema: pageSchema(ROW_SCHEMA, {
            next_cursor: {
              type: ["string", "null"],
              description: "Pass as `cursor` for the next (older) page; null at the end",
            },
            total_estimated: {
              type: "boolean",
              description:
                "True when `total` is an estimate (more than 1,000 matches of a filter other than by action)",
            },
          }),
        },
      },
      async handler(c) {
        const cursor = c.req.query("cursor") || undefined;
        const page = pageRequest(c);
        if (cursor === undefined && (page.page - 1) * page.perPage >= MAX_OFFSET_ROWS) {
          throw badRequest(
            `page: audit entries beyond the newest ${
              MAX_OFFSET_ROWS.toLocaleString("en")
            } are read by cursor; ` +
              "pass the previous page's next_cursor as cursor",
            [{
              field: "page",
              message: `(page - 1) × per_page must be below ${MAX_OFFSET_ROWS}; use cursor`,
            }],
          );
        }
        const found = await listAuditLogs(ctx.db, filterOf(c), { ...page, cursor });
        return c.json({ ...found, items: await withAuditNames(ctx.db, found.items) });
      },
    }),
    route("GET /api/v1/audit-logs/export", "audit_log:export", {
      summary: "Export matching audit log entries as CSV (spreadsheet-safe) or JSON",
      query: { ...FILTER_QUERY, format: { type: "string", enum: ["csv", "json"] } },
      responses: {
        "200": { description: "The entries as a download", contentType: "text/csv or application/json" },
      },
      async handler(c) {
        const filter = filterOf(c);
        const format = c.req.query("format") ?? "csv";
        // Reading the whole audit trail is itself worth a row.
        await ctx.audit.record(callerEvent(c, {
          action: "audit_log.export",
          resource: { type: "audit_log" },
          details: { format, filter: { ...filter } },
        }));
        // The first batch is read before answering, so a filter or database problem is a proper error
        // response rather than a 200 that stops early.
        const rows = iterateAuditLogs(ctx.db, filter)[Symbol.asyncIterator]();
        let next: IteratorResult<AuditLogRow> = await rows.next();
        const encoder = new TextEncoder();
        const stamp = new Date().toISOString().slice(0, 19).replaceAll(":", "-");
        let started = false;
        const line = (row: AuditLogRow, first: boolean) =>
          format === "csv" ? csvLine(csvRow(row)) : `${first ? "" : ","}\n${JSON.stringify(row)}`;
        const stream = new ReadableStream<Uint8Array>({
          // Pulled (backpressure): one chunk of about 64 KiB per read, however large the trail.
          async pull(controller) {
            try {
              let chunk = "";
              if (!started) chunk = format === "csv" ? csvLine(CSV_HEADER) : "[";
              while (!next.done && chunk.length < 65_536) {
                chunk += line(next.value, !started);
                started = true;
                next = await rows.next();
              }
              started = true;
              if (next.done) chunk += format === "csv" ? "" : "\n]\n";
              if (chunk) controller.enqueue(encoder.encode(chunk));
              if (next.done) controller.close();
            } catch (err) {
              // Erroring the stream aborts the response (the web port resets it), so the client sees a
              // failed download, never a complete-looking file that stops early.
              ctx.log.error("audit: export failed midway", { error: String(err) });
              controller.error(err);
            }
          },
          async cancel() {
            await rows.return?.(undefined);
          },
        });
        return new Response(stream, {
          headers: {
            "Content-Type": format === "csv" ? "text/csv; charset=utf-8" : "application/json; charset=utf-8",
            "Content-Disposition": `attachment; filename="svc-audit-${stamp}.${format}"`,
          },
        });
      },
    }),
  ];
}

function csvRow(r: AuditLogRow): unknown[] {
  return [
    r.id,
    r.created_at,
    r.username,
    r.user_id,
    r.action,
    r.outcome,
    r.resource_type,
    r.resource_id,
    r.resource_name,
    r.source_ip,
    r.node_id,
    r.details,
  ];
}
