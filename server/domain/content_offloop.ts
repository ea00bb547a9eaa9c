/**
 * Policy content and bundles off the event loop: checking content, checking a bundle to import and
 * rendering an export are pure (no database), so large ones run in an off-loop worker (server/core/offloop.ts).
 *
 * Policy content goes through {@link checkContentOffLoop}: small content (the common case) is checked on the
 * calling thread, which takes well under a few milliseconds; larger content is checked in a worker, and the
 * result ({@link CheckedContent}) is handed to the policy domain, which then stores it without checking again.
 * The same worker encodes large delivered content as the stream's content and typed members once per content
 * (`server/hub/typed_content_cache.ts`), so no snapshot parses it on the loop.
 */
import {
  type BundleFormat,
  checkBundle,
  checkContent,
  type CheckedBundle,
  type CheckedContent,
  type ExportBindingRow,
  type ExportPolicyRow,
  type RenderedExport,
  renderExport,
} from "./bundle_codec.ts";
import { defineOffLoopJob } from "../core/offloop.ts";
import { PolicyContentError } from "../../shared/policy_types/mod.ts";

/** Content that a policy type refuses to parse is the caller's mistake: `invalid`, with the type's message. */
const invalidWhen = (err: unknown) => err instanceof PolicyContentError;

/**
 * A content check's answer from a worker: the canonical form, or null when it is the content itself. The
 * caller holds the content already; sending it back would cost the loop a copy of it.
 */
export interface CheckedCanonical {
  canonical: string | null;
}

/** Checks one policy's content in a worker; the canonical form comes back only when it differs. */
const checkContentJob = defineOffLoopJob(
  "content",
  (job: { type: string; content: string }) => canonicalOnly(checkContent(job.type, job.content)),
  { invalidWhen },
);

/**
 * Parses a bundle and validates every policy's content in a worker (no database access). Structural problems
 * (size, syntax, envelope) throw `invalid` naming the document and field.
 */
export const checkBundleOffLoop: (input: { text: string; format?: BundleFormat }) => Promise<CheckedBundle> =
  defineOffLoopJob(
    "check",
    (job: { text: string; format?: BundleFormat }) => withoutParsedContent(checkBundle(job.text, job.format)),
    { invalidWhen },
  );

/** Renders policies (and their bindings) as an export bundle in a worker. */
export const renderExportOffLoop: (input: {
  policies: ExportPolicyRow[];
  bindings?: ExportBindingRow[];
  format: BundleFormat;
}) => Promise<RenderedExport> = defineOffLoopJob(
  "render",
  (job: { policies: ExportPolicyRow[]; bindings?: ExportBindingRow[]; format: BundleFormat }) =>
    renderExport(job.policies, job.bindings, job.format),
  { invalidWhen },
);

function canonicalOnly(checked: CheckedContent): CheckedCanonical {
  return { canonical: checked.canonical === checked.content ? null : checked.canonical };
}

/** `content` as checked: the worker's answer ({@link CheckedCanonical}) with the content the caller holds. */
function withContent(type: string, content: string, answer: CheckedCanonical): CheckedContent {
  return { type, content, canonical: answer.canonical ?? content };
}

/**
 * The checked bundle without each policy's parsed content object: the caller needs only its JSON text and
 * canonical form (in `contents`), and copying a 100,000-key object back to the server's thread would cost
 * that thread as much as a parse.
 */
function withoutParsedContent(checked: CheckedBundle): CheckedBundle {
  for (const doc of checked.docs) if (doc.kind === "Policy") doc.spec.content = null;
  return checked;
}

/**
 * Longest content (in UTF-16 code units) checked on the calling thread. Checking costs about 1 ms per 2 KB
 * of content on a loaded machine (parse, semantic checks, canonical form), so this keeps the loop's share to
 * a few milliseconds while ordinary policies (a few KB) never wait for a worker.
 */
export const INLINE_CONTENT_LENGTH = 8 * 1024;

/**
 * Validates policy content and returns what to store ({@link checkContent}): on this thread when it is short,
 * in a worker when it is longer than {@link INLINE_CONTENT_LENGTH}. Throws `invalid` naming the field.
 */
export async function checkContentOffLoop(type: string, content: string): Promise<CheckedContent> {
  if (content.length <= INLINE_CONTENT_LENGTH) return checkContent(type, content);
  return withContent(type, content, await checkContentJob({ type, content }));
}

/**
 * Checks stored content that a unit of work is about to check again (a release), off the event loop and
 * before the unit opens: the result lets the domain skip its own check (`assertReleasable`, policies.ts).
 * Undefined for short content (checked inline in the unit, cheaply) and for content that fails, which the
 * domain then refuses with its own message.
 */
export async function precheckContent(type: string, content: string): Promise<CheckedContent | undefined> {
  if (content.length <= INLINE_CONTENT_LENGTH) return undefined;
  return await checkContentJob({ type, content }).then(
    (answer) => withContent(type, content, answer),
    () => undefined,
  );
}
