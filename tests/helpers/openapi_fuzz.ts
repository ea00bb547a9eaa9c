/**
 * Hostile requests generated from the server's own OpenAPI document (`/api/v1/openapi.json`): for every
 * operation, fast-check arbitraries that follow the declared body and query schemas loosely (right shapes
 * with hostile strings, wrong types, unknown and prototype keys, extreme numbers), plus fixed examples every
 * run includes (a lone surrogate and NUL in every string field, `constructor`/`__proto__` keys, 30-deep
 * nesting, huge strings). Used by tests/server/fuzz_routes_test.ts.
 */
import fc from "fast-check";

/** A JSON Schema as the OpenAPI document carries it (the subset the server uses). */
export interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: unknown[];
  format?: string;
  minimum?: number;
  maximum?: number;
  maxLength?: number;
}

/** One operation of the document. */
export interface FuzzOperation {
  method: string;
  /** OpenAPI path with `{param}`s. */
  path: string;
  pathParams: string[];
  query: Record<string, Schema>;
  jsonBody?: Schema;
  rawBodyTypes?: string[];
  audited: boolean;
  key: string;
}

/** A concrete request. */
export interface FuzzRequest {
  /** Path values by parameter name (already URL-encoded). */
  pathValues: Record<string, string>;
  /** Query string without `?` (already encoded). */
  query: string;
  /** Body text and its content type, if any. */
  body?: { text: string; contentType: string };
}

/** Strings no validator should let reach the database, or that stress it. */
export const HOSTILE_STRINGS: readonly string[] = [
  "\udc00",
  "\ud800",
  "a\u0000b",
  "\u0000",
  "\u001b[31mred",
  "line\r\nforged: yes",
  "\u0085\u009b\u007f\b",
  "\u2028\u2029",
  "\u202etxt.exe",
  "../../etc/passwd",
  "'; DROP TABLE users; --",
  "<script>alert(1)</script>",
  "=cmd|' /C calc'!A0",
  "${jndi:ldap://x}",
  "constructor",
  "__proto__",
  "",
  " ",
  "x".repeat(5_000),
];

/** Object keys that must never reach prototypes or pass as known fields. */
export const PROTOTYPE_KEYS: readonly string[] = ["constructor", "__proto__", "prototype", "toString"];

/** Reads the operations of an OpenAPI document. */
export function operationsOf(doc: { paths: Record<string, Record<string, unknown>> }): FuzzOperation[] {
  const out: FuzzOperation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(methods)) {
      const op = raw as {
        parameters?: { name: string; in: string; schema: Schema }[];
        requestBody?: { content: Record<string, { schema: Schema }> };
        "x-audit"?: unknown;
      };
      const params = op.parameters ?? [];
      const content = op.requestBody?.content ?? {};
      out.push({
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === "path").map((p) => p.name),
        query: Object.fromEntries(params.filter((p) => p.in === "query").map((p) => [p.name, p.schema])),
        jsonBody: content["application/json"]?.schema,
        rawBodyTypes: content["application/json"]
          ? undefined
          : Object.keys(content).length
          ? Object.keys(content)
          : undefined,
        audited: op["x-audit"] !== undefined,
        key: `${method.toUpperCase()} ${path}`,
      });
    }
  }
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

const hostileString = fc.constantFrom(...HOSTILE_STRINGS);

function anyString(schema: Schema): fc.Arbitrary<string> {
  const options: fc.Arbitrary<string>[] = [
    hostileString,
    fc.string({ maxLength: 40 }),
    fc.string({ unit: "binary", maxLength: 20 }),
  ];
  if (schema.enum) options.push(fc.constantFrom(...schema.enum.map(String)));
  if (schema.format === "uuid") options.push(fc.uuid().map(String));
  if (schema.format === "date-time") {
    options.push(fc.date({ noInvalidDate: true }).map((d) => d.toISOString()));
  }
  return fc.oneof(...options);
}

const extremeNumber = fc.constantFrom(-1, 0, 1, 2 ** 31, 2 ** 53, -(2 ** 53), 1e308, -1e308, 0.5);

/** A loosely schema-shaped value: mostly the declared shape with hostile leaves, sometimes the wrong type. */
export function arbitraryFor(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  const types = schema?.type ? (Array.isArray(schema.type) ? schema.type : [schema.type]) : [];
  const wrong = fc.oneof(
    fc.constant(null),
    fc.boolean(),
    extremeNumber,
    hostileString,
    fc.constant([]),
    fc.constant({}),
  );
  if (!schema || depth > 4) return wrong;
  const shaped: fc.Arbitrary<unknown>[] = [];
  for (const type of types) {
    if (type === "string") shaped.push(anyString(schema));
    if (type === "integer" || type === "number") {
      shaped.push(
        fc.oneof(extremeNumber, fc.integer({ min: schema.minimum ?? -10, max: schema.maximum ?? 1000 })),
      );
    }
    if (type === "boolean") shaped.push(fc.boolean());
    if (type === "null") shaped.push(fc.constant(null));
    if (type === "array") shaped.push(fc.array(arbitraryFor(schema.items, depth + 1), { maxLength: 4 }));
    if (type === "object") shaped.push(objectFor(schema, depth));
  }
  if (shaped.length === 0) shaped.push(fc.jsonValue({ maxDepth: 2 }));
  return fc.oneof({ arbitrary: fc.oneof(...shaped), weight: 5 }, { arbitrary: wrong, weight: 1 });
}

function objectFor(schema: Schema, depth: number): fc.Arbitrary<unknown> {
  const props = schema.properties ?? {};
  const known = fc.record(
    Object.fromEntries(Object.entries(props).map(([k, s]) => [k, arbitraryFor(s, depth + 1)])),
    { requiredKeys: [] },
  );
  const extra = fc.dictionary(
    fc.oneof(fc.constantFrom(...PROTOTYPE_KEYS), hostileString, fc.string({ maxLength: 8 })),
    fc.jsonValue({ maxDepth: 1 }),
    { maxKeys: 2 },
  );
  return fc.tuple(known, fc.oneof({ arbitrary: fc.constant({}), weight: 3 }, { arbitrary: extra, weight: 1 }))
    .map(([a, b]) => {
      // Own properties even for `__proto__` (as JSON.parse creates them).
      const out: Record<string, unknown> = {};
      for (const [k, v] of [...Object.entries(a as object), ...Object.entries(b)]) {
        Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
      }
      return out;
    });
}

/** Percent-encodes a string for a URL, lone surrogates included (as the WTF-8 bytes a raw client could send). */
export function encodeValue(value: string): string {
  let out = "";
  for (const ch of value) {
    const code = ch.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`).join("");
    } else out += encodeURIComponent(ch);
  }
  return out;
}

function queryString(values: Record<string, unknown>): string {
  return Object.entries(values).filter(([, v]) => v !== undefined).map(([k, v]) =>
    `${encodeValue(k)}=${encodeValue(typeof v === "string" ? v : JSON.stringify(v) ?? "")}`
  ).join("&");
}

/** The request arbitrary of an operation; `ids` are path values worth hitting (existing resources). */
export function requestArbitrary(op: FuzzOperation, ids: readonly string[]): fc.Arbitrary<FuzzRequest> {
  const pathValue = fc.oneof(
    { arbitrary: fc.constantFrom(...ids), weight: 4 },
    { arbitrary: fc.uuid().map(String), weight: 2 },
    { arbitrary: hostileString.map(encodeValue), weight: 1 },
  );
  const query = fc.record(
    Object.fromEntries(Object.entries(op.query).map(([k, s]) => [k, arbitraryFor(s)])),
    { requiredKeys: [] },
  );
  const body: fc.Arbitrary<FuzzRequest["body"]> = op.jsonBody
    ? arbitraryFor(op.jsonBody).map((v) => ({
      text: JSON.stringify(v) ?? "null",
      contentType: "application/json",
    }))
    : op.rawBodyTypes
    ? fc.oneof(hostileString, fc.string({ maxLength: 200 })).map((text) => ({
      text,
      contentType: op.rawBodyTypes![0],
    }))
    : fc.constant(undefined);
  return fc.record({
    pathValues: fc.record(Object.fromEntries(op.pathParams.map((p) => [p, pathValue]))) as fc.Arbitrary<
      Record<string, string>
    >,
    query: query.map(queryString),
    body,
  });
}

/** Every string leaf of `value` replaced by `replace(leaf)`. */
function mapStrings(value: unknown, replace: (s: string) => unknown): unknown {
  if (typeof value === "string") return replace(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, replace));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapStrings(v, replace)]));
  }
  return value;
}

/** The smallest value of the declared shape, every string a plain word (the base of the fixed examples). */
export function plainValue(schema: Schema | undefined, depth = 0): unknown {
  const type = Array.isArray(schema?.type) ? schema.type.find((t) => t !== "null") : schema?.type;
  if (!schema || depth > 6) return "x";
  if (schema.enum) return schema.enum[0];
  if (type === "string") return schema.format === "uuid" ? crypto.randomUUID() : "fuzz";
  if (type === "integer" || type === "number") return schema.minimum ?? 1;
  if (type === "boolean") return true;
  if (type === "array") return [plainValue(schema.items, depth + 1)];
  if (type === "object") {
    return Object.fromEntries(
      Object.entries(schema.properties ?? {}).map(([k, s]) => [k, plainValue(s, depth + 1)]),
    );
  }
  return "fuzz";
}

function nested(levels: number, leaf: unknown): unknown {
  let v = leaf;
  for (let i = 0; i < levels; i++) v = i % 2 ? { deeper: v } : [v];
  return v;
}

/** The fixed hostile examples of an operation (each run includes all of them). */
export function fixedExamples(op: FuzzOperation, ids: readonly string[]): FuzzRequest[] {
  const pathValues = Object.fromEntries(op.pathParams.map((p) => [p, ids[0] ?? crypto.randomUUID()]));
  const out: FuzzRequest[] = [];
  // Only the free-text parameters: a hostile `page` would stop the request before the text reaches anything.
  const stringQuery = (value: string) =>
    queryString(
      Object.fromEntries(
        Object.entries(op.query).filter(([, s]) => s.type === "string" && !s.enum && !s.format).map((
          [k],
        ) => [k, value]),
      ),
    );
  const json = (v: unknown) => ({ text: JSON.stringify(v), contentType: "application/json" });
  const base = op.jsonBody ? plainValue(op.jsonBody) : undefined;
  for (const hostile of ["\udc00", "a\u0000b", "x".repeat(200_000)]) {
    out.push({
      pathValues,
      query: stringQuery(hostile.length > 1000 ? hostile.slice(0, 10_000) : hostile),
      body: op.jsonBody
        ? json(mapStrings(base, () => hostile))
        : op.rawBodyTypes
        ? { text: hostile, contentType: op.rawBodyTypes[0] }
        : undefined,
    });
  }
  if (op.jsonBody) {
    const text = JSON.stringify(base);
    const open = text.startsWith("{") && text !== "{}" ? text.slice(0, -1) + "," : "{";
    // The random requests try the other prototype keys too.
    for (const key of ["constructor", "__proto__"]) {
      out.push({
        pathValues,
        query: "",
        body: { text: `${open}"${key}":{"polluted":true}}`, contentType: "application/json" },
      });
    }
    const firstKey = Object.keys(op.jsonBody.properties ?? {})[0] ?? "deep";
    out.push({
      pathValues,
      query: "",
      body: json({ ...(base as object), [firstKey]: nested(30, "\udc00") }),
    });
    out.push({ pathValues, query: "", body: json(nested(30, base)) });
  }
  return out;
}

/** The request's URL path and query. */
export function urlOf(op: FuzzOperation, req: FuzzRequest): string {
  const path = op.path.replace(/\{([A-Za-z_]+)\}/g, (_, name) => req.pathValues[name] ?? crypto.randomUUID());
  return req.query ? `${path}?${req.query}` : path;
}
