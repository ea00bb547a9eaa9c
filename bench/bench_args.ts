/**
 * The command-line flags of the benchmarks (`--flag value` pairs, a few flags without a value), read into an
 * options object whose fields start at the benchmark's defaults.
 */

/** The database the benchmarks use unless `--database-url` says otherwise (the tests' variable, else local). */
export const DEFAULT_DATABASE_URL = Deno.env.get("SVC_TEST_DATABASE_URL") ??
  "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * Which options the flags set. An option's flag is its name in kebab case after `--` (`policyBytes`:
 * `--policy-bytes`).
 */
export interface Flags<O> {
  /** Options taking a whole number, refused below their `min` (1 unless given). */
  ints?: (keyof O & string)[];
  min?: Partial<Record<keyof O & string, number>>;
  /** Options taking any text. */
  strings?: (keyof O & string)[];
  /** Flags without a value (spelled out), each with what it changes. */
  switches?: Record<string, (o: O) => void>;
}

/** `--` and the option's name in kebab case. */
function flagOf(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/**
 * Reads `args` into `o` (the defaults, changed in place and returned). An unknown flag, a missing value or a
 * number out of range throws an error that names the flag and ends with `usage`.
 */
export function parseFlags<O>(args: string[], usage: string, o: O, flags: Flags<O>): O {
  const ints = new Map((flags.ints ?? []).map((key) => [flagOf(key), key]));
  const strings = new Map((flags.strings ?? []).map((key) => [flagOf(key), key]));
  for (let i = 0; i < args.length; i++) {
    const [flag, value] = [args[i], args[i + 1]];
    const int = ints.get(flag);
    const text = strings.get(flag);
    const toggle = flags.switches?.[flag];
    if (toggle) {
      toggle(o);
      continue;
    }
    if (int) {
      const min = flags.min?.[int] ?? 1;
      const n = Number(value);
      if (!Number.isInteger(n) || n < min) {
        const wanted = min === 1 ? "a positive whole number" : `a whole number ≥ ${min}`;
        throw new Error(`${flag} needs ${wanted}\n${usage}`);
      }
      (o[int] as number) = n;
    } else if (text) {
      (o[text] as string) = value ?? "";
    } else {
      throw new Error(`unknown argument ${flag}\n${usage}`);
    }
    i++;
  }
  return o;
}
