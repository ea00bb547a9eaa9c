/**
 * Pieces shared by the routes: handlers for the shapes most routes on one resource take (read it by its
 * `:id`; change it by its `:id` in a transaction, naming it in the audit row; change an identity record
 * with step-up), and schema fragments. Request readers live in ../route.ts, page and sort parameters in ../pagination.ts.
 */
import type { Db, Queryable } from "../../db/db.ts";
import { identityTransaction } from "../../auth/rbac.ts";
import type { IdentityServices } from "../../auth/services.ts";
import type { JsonSchema } from "../json_schema.ts";
import { auditResource, respondJson, type RouteContext, type RouteSpec, uuidParam } from "../route.ts";
import { auditChanges } from "../audit_changes.ts";
import { checkStepUp, takeStepUpProof } from "../step_up.ts";

type Handler = RouteSpec["handler"];
type Change<T> = (tx: Queryable, id: string, c: RouteContext) => Promise<T>;
type Respond<T> = (c: RouteContext, record: T) => Response | Promise<Response>;

/**
 * Fields of the record whose changes the audit row names (`details.changes`, see ../audit_changes.ts): `read`
 * gives the record before the change, in the change's transaction; the change's result is the after.
 */
export interface Tracked {
  read: (q: Queryable, id: string) => Promise<object>;
  fields: readonly string[];
  /** Fields holding policy content, compared by setting. */
  contentFields?: readonly string[];
}

/** Handler answering with the record named by the `:id` path parameter (`read` throws not_found). */
export function readById<T>(db: Db, read: (q: Queryable, id: string) => Promise<T>): Handler {
  return async (c) => await respondJson(c, await read(db, uuidParam(c, "id")));
}

/** Answers 204 without a body (what a delete returns). */
export function noContent(c: RouteContext): Response {
  return c.body(null, 204);
}

/**
 * Handler of a change to the resource named by the `:id` path parameter: runs `change` in one transaction,
 * names the changed record in the audit row (by `auditName`, default its `name`), and answers with the
 * record, or as `respond` says.
 */
export function changeById<T extends { name: string }>(
  db: Db,
  change: Change<T>,
  options?: { respond?: Respond<T>; track?: Tracked },
): Handler;
/** As above, for a record without a `name` of its own. */
export function changeById<T>(
  db: Db,
  change: Change<T>,
  options: { respond?: Respond<T>; auditName: (record: T) => string; track?: Tracked },
): Handler;
export function changeById<T>(
  db: Db,
  change: Change<T>,
  options: { respond?: Respond<T>; auditName?: (record: T) => string; track?: Tracked } = {},
): Handler {
  const auditName = options.auditName ?? ((record: T) => (record as { name: string }).name);
  const respond = options.respond ?? ((c: RouteContext, record: T) => respondJson(c, record));
  const track = options.track;
  return async (c) => {
    const id = uuidParam(c, "id");
    const { before, record } = await db.transaction(async (tx) => {
      const before = track ? await track.read(tx, id) : undefined;
      return { before, record: await change(tx, id, c) };
    });
    auditResource(c, { id, name: auditName(record) });
    if (track && before) auditChanges(c, { before, after: record as object, ...track });
    return await respond(c, record);
  };
}

/**
 * Handler of a change to who may do what (a role, a user group, its members, a role binding) that answers
 * 204 and may need step-up: the `:id` and the proof are read first, then `change` runs in one identity
 * transaction and calls `stepUp()` where the change alters what someone may do.
 */
export function identityChange(
  s: IdentityServices,
  change: (tx: Queryable, id: string, c: RouteContext, stepUp: () => Promise<void>) => Promise<void>,
): Handler {
  return async (c) => {
    const id = uuidParam(c, "id");
    const proof = takeStepUpProof(c);
    await identityTransaction(s.ctx.db, (tx) => change(tx, id, c, () => checkStepUp(s.stepUp, tx, c, proof)));
    return noContent(c);
  };
}

/**
 * Single-line name text: no control characters (C0 such as ESC, CR, LF and BS; DEL; C1), so a name cannot
 * forge lines or terminal escapes wherever it is shown or logged.
 */
export const NAME_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$";
/** As {@link NAME_PATTERN}, but may be empty (optional labels such as a user's full name). */
export const OPTIONAL_NAME_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";
/** A name that must also show something: at least one character that is not white space. */
export const VISIBLE_NAME_PATTERN = "^(?=.*\\S)[^\\u0000-\\u001f\\u007f-\\u009f]+$";
/** Free text: no control characters except tab and newline. */
export const TEXT_PATTERN = "^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]*$";

/** Timestamp schema. */
export const DATE_TIME: JsonSchema = { type: "string", format: "date-time" };

/** `lockout_reason` of the requests a lockout guard checks (server/domain/lockout_guards.ts). */
export const LOCKOUT_REASON: JsonSchema = {
  type: "string",
  minLength: 3,
  maxLength: 500,
  pattern: TEXT_PATTERN,
  description:
    "SessionAccess and Privilege: why to go ahead although the set would lock people out of a node group (SessionAccess: no named account may log in at some time; Privilege: nobody but root administers its nodes) (audited)",
};
