/**
 * CSV for the audit export (RFC 4180 quoting) that is safe to open in a spreadsheet: a cell that starts with
 * a character a spreadsheet reads as a formula (`= + - @`, tab, carriage return, or their full-width forms)
 * is prefixed with `'` so it stays text.
 */

const FORMULA_START = /^[=+\-@\t\r\uFF1D\uFF0B\uFF0D\uFF20]/;

/** One cell: neutralised and quoted. */
export function csvCell(value: unknown): string {
  let s = value === null || value === undefined
    ? ""
    : value instanceof Date
    ? value.toISOString()
    : typeof value === "object"
    ? JSON.stringify(value)
    : String(value);
  if (FORMULA_START.test(s.trimStart()) || FORMULA_START.test(s)) s = `'${s}`;
  return `"${s.replaceAll('"', '""')}"`;
}

/** One CSV line (CRLF-terminated, as RFC 4180 specifies). */
export function csvLine(values: readonly unknown[]): string {
  return values.map(csvCell).join(",") + "\r\n";
}
