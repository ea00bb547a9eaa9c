/**
 * Strict parsers for the two Prometheus exposition formats, for tests: OpenMetrics 1.0 text and the classic
 * text format 0.0.4. They reject what Prometheus would reject or silently misread instead of being lenient:
 * missing or misplaced `# EOF`, blank lines and stray comments (OpenMetrics), metadata after samples, families
 * split in two, samples whose name does not belong to the declared type, bad names and escapes, duplicate
 * series, negative or NaN counters, and histograms whose buckets are unsorted, not cumulative, lack `+Inf` or
 * disagree with `_count`.
 */

/** One parsed sample. */
export interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One parsed family, keyed by its family name (OpenMetrics counters: without `_total`). */
export interface ParsedFamily {
  name: string;
  type: string;
  help: string | undefined;
  samples: ParsedSample[];
}

/** A format violation, with the 1-based line number. */
export class ExpositionParseError extends Error {
  constructor(readonly line: number, message: string) {
    super(`line ${line}: ${message}`);
    this.name = "ExpositionParseError";
  }
}

type Format = "openmetrics" | "text";

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const OM_NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

const SUFFIXES: Record<Format, Record<string, string[]>> = {
  openmetrics: {
    counter: ["_total", "_created"],
    gauge: [""],
    histogram: ["_bucket", "_count", "_sum", "_created"],
    gaugehistogram: ["_bucket", "_gcount", "_gsum"],
    summary: ["", "_count", "_sum", "_created"],
    info: ["_info"],
    stateset: [""],
    unknown: [""],
  },
  text: {
    counter: [""],
    gauge: [""],
    histogram: ["_bucket", "_count", "_sum"],
    summary: ["", "_count", "_sum"],
    untyped: [""],
  },
};

function parseNumber(raw: string, format: Format, line: number): number {
  if (raw === "+Inf" || (format === "text" && raw === "Inf")) return Infinity;
  if (raw === "-Inf") return -Infinity;
  if (raw === "NaN") return NaN;
  if (!OM_NUMBER.test(raw)) throw new ExpositionParseError(line, `invalid number "${raw}"`);
  return Number(raw);
}

/** Reads `{a="x",b="y"}` starting at `text[start] === "{"`; returns labels and the index after `}`. */
function parseLabels(text: string, start: number, line: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  let i = start + 1;
  if (text[i] === "}") return [labels, i + 1];
  for (;;) {
    const eq = text.indexOf("=", i);
    if (eq < 0) throw new ExpositionParseError(line, "label without value");
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name)) throw new ExpositionParseError(line, `invalid label name "${name}"`);
    if (name in labels) throw new ExpositionParseError(line, `duplicate label "${name}"`);
    if (text[eq + 1] !== '"') throw new ExpositionParseError(line, `label ${name} value not quoted`);
    let value = "";
    let j = eq + 2;
    for (;; j++) {
      const c = text[j];
      if (c === undefined) throw new ExpositionParseError(line, `unterminated value of label ${name}`);
      if (c === '"') break;
      if (c === "\n") throw new ExpositionParseError(line, "raw newline in label value");
      if (c === "\\") {
        const e = text[++j];
        if (e === "\\") value += "\\";
        else if (e === '"') value += '"';
        else if (e === "n") value += "\n";
        else throw new ExpositionParseError(line, `invalid escape "\\${e}" in label ${name}`);
      } else value += c;
    }
    labels[name] = value;
    i = j + 1;
    if (text[i] === "}") return [labels, i + 1];
    if (text[i] !== ",") throw new ExpositionParseError(line, `expected "," or "}" after label ${name}`);
    i++;
  }
}

function unescapeHelp(raw: string, format: Format, line: number): string {
  return raw.replace(/\\(.)/g, (_, c: string) => {
    if (c === "\\") return "\\";
    if (c === "n") return "\n";
    if (c === '"' && format === "openmetrics") return '"';
    throw new ExpositionParseError(line, `invalid escape "\\${c}" in HELP`);
  });
}

function checkHistogram(family: ParsedFamily, line: number): void {
  const groups = new Map<string, { buckets: [number, number][]; count?: number }>();
  for (const s of family.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const g = groups.get(key) ?? { buckets: [] };
    groups.set(key, g);
    if (s.name === `${family.name}_bucket`) {
      if (le === undefined) throw new ExpositionParseError(line, `${s.name} without le`);
      const bound = le === "+Inf" ? Infinity : Number(le);
      if (Number.isNaN(bound) || (le !== "+Inf" && !OM_NUMBER.test(le))) {
        throw new ExpositionParseError(line, `invalid le "${le}" in ${family.name}`);
      }
      g.buckets.push([bound, s.value]);
    } else if (s.name === `${family.name}_count`) g.count = s.value;
  }
  for (const g of groups.values()) {
    for (let i = 1; i < g.buckets.length; i++) {
      if (g.buckets[i][0] <= g.buckets[i - 1][0]) {
        throw new ExpositionParseError(line, `${family.name}: buckets out of order`);
      }
      if (g.buckets[i][1] < g.buckets[i - 1][1]) {
        throw new ExpositionParseError(line, `${family.name}: buckets not cumulative`);
      }
    }
    const last = g.buckets.at(-1);
    if (!last || last[0] !== Infinity) {
      throw new ExpositionParseError(line, `${family.name}: +Inf bucket missing`);
    }
    if (g.count === undefined || g.count !== last[1]) {
      throw new ExpositionParseError(line, `${family.name}: _count does not match the +Inf bucket`);
    }
  }
}

function parse(text: string, format: Format): Map<string, ParsedFamily> {
  const om = format === "openmetrics";
  const families = new Map<string, ParsedFamily>();
  const finished = new Set<string>();
  const seriesSeen = new Set<string>();
  let current: ParsedFamily | undefined;
  const lines = text.split("\n");
  if (lines.at(-1) !== "") throw new ExpositionParseError(lines.length, "output does not end with a newline");
  lines.pop();
  if (om && lines.at(-1) !== "# EOF") {
    throw new ExpositionParseError(lines.length, "missing # EOF at the end");
  }

  const close = () => {
    if (!current) return;
    if (current.type === "histogram") checkHistogram(current, 0);
    finished.add(current.name);
    current = undefined;
  };
  const open = (name: string, n: number): ParsedFamily => {
    if (current?.name === name) return current;
    close();
    if (finished.has(name)) throw new ExpositionParseError(n, `family ${name} appears twice (interleaved)`);
    if (!METRIC_NAME.test(name)) throw new ExpositionParseError(n, `invalid metric name "${name}"`);
    current = { name, type: om ? "unknown" : "untyped", help: undefined, samples: [] };
    families.set(name, current);
    return current;
  };
  const typeSeen = new Set<string>();

  for (let idx = 0; idx < lines.length; idx++) {
    const n = idx + 1;
    const line = lines[idx];
    if (om && idx === lines.length - 1) break; // the # EOF line
    if (line === "") {
      if (om) throw new ExpositionParseError(n, "blank line");
      continue;
    }
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE|UNIT) (\S+)(?: (.*))?$/.exec(line);
      if (!m) {
        if (om) throw new ExpositionParseError(n, `invalid comment line "${line}"`);
        if (/^#\s*(HELP|TYPE)\b/.test(line)) throw new ExpositionParseError(n, `malformed ${line}`);
        continue;
      }
      const [, kind, name, rest = ""] = m;
      if (kind === "UNIT" && !om) continue;
      const family = open(name, n);
      if (family.samples.length) throw new ExpositionParseError(n, `${kind} for ${name} after its samples`);
      if (kind === "HELP") {
        if (family.help !== undefined) throw new ExpositionParseError(n, `second HELP for ${name}`);
        family.help = unescapeHelp(rest, format, n);
      } else if (kind === "TYPE") {
        if (typeSeen.has(name)) throw new ExpositionParseError(n, `second TYPE for ${name}`);
        if (!(rest in SUFFIXES[format])) {
          throw new ExpositionParseError(n, `invalid type "${rest}" for ${name}`);
        }
        typeSeen.add(name);
        family.type = rest;
      }
      continue;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new ExpositionParseError(n, `invalid sample line "${line}"`);
    const sampleName = line.slice(0, nameEnd);
    if (!METRIC_NAME.test(sampleName)) {
      throw new ExpositionParseError(n, `invalid metric name "${sampleName}"`);
    }
    let labels: Record<string, string> = {};
    let pos = nameEnd;
    if (line[pos] === "{") [labels, pos] = parseLabels(line, pos, n);
    if (line[pos] !== " ") throw new ExpositionParseError(n, "expected one space before the value");
    const fields = line.slice(pos + 1).split(" ");
    if (fields.length > 2 || fields.some((f) => f === "")) {
      throw new ExpositionParseError(n, `unexpected text after the value: "${line}"`);
    }
    const value = parseNumber(fields[0], format, n);
    if (fields[1] !== undefined) parseNumber(fields[1], format, n);

    // Which family does this sample belong to?
    let family = current;
    const allowed = family ? SUFFIXES[format][family.type].map((s) => family!.name + s) : [];
    if (!family || !allowed.includes(sampleName)) {
      if (family && (sampleName === family.name || finished.has(sampleName))) {
        throw new ExpositionParseError(
          n,
          `sample ${sampleName} does not fit ${family.type} family ${family.name}`,
        );
      }
      family = open(sampleName, n);
    }
    const suffix = sampleName.slice(family.name.length);
    const series = `${sampleName}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seriesSeen.has(series)) throw new ExpositionParseError(n, `duplicate series ${series}`);
    seriesSeen.add(series);
    const counterLike = (family.type === "counter" && (om ? suffix === "_total" : true)) ||
      ["_bucket", "_count", "_sum"].includes(suffix) && family.type === "histogram";
    if (counterLike && (Number.isNaN(value) || value < 0)) {
      throw new ExpositionParseError(n, `${sampleName} must be a non-negative number, got ${fields[0]}`);
    }
    if (family.type === "histogram" && suffix === "_bucket" && om && labels.le !== undefined) {
      const le = labels.le;
      if (le !== "+Inf" && Number.isInteger(Number(le)) && !le.includes(".") && !/e/i.test(le)) {
        throw new ExpositionParseError(n, `le="${le}" is not canonical (OpenMetrics wants "${le}.0")`);
      }
    }
    family.samples.push({ name: sampleName, labels, value });
  }
  close();
  // A family's reserved sample names must not be claimed by another family.
  const claimed = new Map<string, string>();
  for (const f of families.values()) {
    for (const s of SUFFIXES[format][f.type]) {
      const owner = claimed.get(f.name + s);
      if (owner && owner !== f.name) {
        throw new ExpositionParseError(0, `${f.name}${s} clashes with family ${owner}`);
      }
      claimed.set(f.name + s, f.name);
    }
  }
  return families;
}

/** Parses OpenMetrics 1.0 text strictly; throws {@link ExpositionParseError} on the first violation. */
export function parseOpenMetrics(text: string): Map<string, ParsedFamily> {
  return parse(text, "openmetrics");
}

/** Parses the classic Prometheus text format 0.0.4 strictly. */
export function parseClassicText(text: string): Map<string, ParsedFamily> {
  return parse(text, "text");
}
