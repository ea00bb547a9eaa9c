/**
 * Hard limits on policy content, enforced before anything expensive happens: the byte size is checked first,
 * the nesting depth is measured by a linear scan of the raw text (no recursion, so 100 000 open brackets cost
 * nothing), and only then is the text parsed. After parsing every string and key is checked for length and
 * NUL characters, naming its path.
 */
import { PolicyContentError } from "./errors.ts";
import { MAX_CONTENT_BYTES, MAX_JSON_DEPTH, MAX_STRING_LENGTH } from "./sanitizers.ts";

/** UTF-8 length of `text` without allocating (surrogate pairs count 4). */
export function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Deepest bracket nesting of JSON text, ignoring brackets inside strings; stops counting past `limit`. */
export function jsonDepth(text: string, limit = MAX_JSON_DEPTH): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) max = depth;
      if (max > limit) return max;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return max;
}

/**
 * Checks size and depth, parses JSON, and checks every string and key. Throws {@link PolicyContentError} with
 * a message that names the limit and, where it applies, the path.
 */
export function parseGuardedJson(content: string): unknown {
  const bytes = utf8Length(content);
  if (bytes > MAX_CONTENT_BYTES) {
    throw new PolicyContentError(
      `content is too large (${bytes} bytes); the limit is ${MAX_CONTENT_BYTES} bytes`,
    );
  }
  if (jsonDepth(content) > MAX_JSON_DEPTH) {
    throw new PolicyContentError(
      `content is nested too deeply; at most ${MAX_JSON_DEPTH} levels are allowed`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch (err) {
    throw new PolicyContentError(`content is not valid JSON (${(err as Error).message})`);
  }
  checkStrings(value);
  return value;
}

function checkStrings(root: unknown): void {
  // Fast pass without paths (building a path string per key cost more than the parse); only when it finds a
  // problem does the second pass walk again with paths, to name where the problem is.
  if (stringsOk(root)) return;
  const stack: { value: unknown; path: string }[] = [{ value: root, path: "" }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === "string") {
      checkString(value, path);
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: `${path}[${i}]` }));
    } else if (value !== null && typeof value === "object") {
      for (const [key, v] of Object.entries(value)) {
        const child = joinPath(path, key);
        checkString(key, child);
        stack.push({ value: v, path: child });
      }
    }
  }
}

function stringOk(value: string): boolean {
  return value.length <= MAX_STRING_LENGTH && !value.includes("\0");
}

/** True when no string or key breaks a limit (one linear walk, no allocation per value). */
function stringsOk(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === "string") {
      if (!stringOk(value)) return false;
    } else if (Array.isArray(value)) {
      for (const v of value) stack.push(v);
    } else if (value !== null && typeof value === "object") {
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        if (!stringOk(key)) return false;
        stack.push((value as Record<string, unknown>)[key]);
      }
    }
  }
  return true;
}

function checkString(value: string, path: string): void {
  if (value.length > MAX_STRING_LENGTH) {
    throw new PolicyContentError(
      `text is too long (${value.length} characters); the limit is ${MAX_STRING_LENGTH}`,
      path,
    );
  }
  if (value.includes("\0")) throw new PolicyContentError("must not contain a NUL character", path);
}

/** `a.b`, `a[0]`, or `a["odd key"]` for keys that are not plain identifiers. */
export function joinPath(path: string, key: string): string {
  if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return path ? `${path}.${key}` : key;
  return `${path}[${JSON.stringify(key)}]`;
}
