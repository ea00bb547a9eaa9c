/**
 * A small shell tokenizer for the Scripts editor's highlighting: comments, quoted strings, variables and
 * substitutions, keywords, and the rest. Lightweight on purpose (no editor library): it only colours, it never
 * decides anything, so a construct it reads differently from the shell is merely coloured differently. Runs without
 * DOM (tested in tests/web).
 */

/** What a piece of script text is, for its colour. */
export type ShellTokenKind = "comment" | "string" | "variable" | "keyword" | "operator" | "text";

/** A piece of script text. */
export interface ShellToken {
  kind: ShellTokenKind;
  text: string;
}

const KEYWORDS = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "for",
  "while",
  "until",
  "do",
  "done",
  "case",
  "esac",
  "in",
  "function",
  "return",
  "exit",
  "local",
  "export",
  "readonly",
  "set",
  "unset",
  "trap",
  "select",
]);

/** Splits `text` into tokens whose texts, joined, are `text` again. */
export function shellTokens(text: string): ShellToken[] {
  const out: ShellToken[] = [];
  const push = (kind: ShellTokenKind, piece: string) => {
    const last = out[out.length - 1];
    if (last && last.kind === kind && kind === "text") last.text += piece;
    else out.push({ kind, text: piece });
  };
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    const atWordStart = i === 0 || /[\s;&|()]/.test(text[i - 1]);
    if (ch === "#" && atWordStart) {
      const end = text.indexOf("\n", i);
      const stop = end < 0 ? text.length : end;
      push("comment", text.slice(i, stop));
      i = stop;
    } else if (ch === "'") {
      const end = text.indexOf("'", i + 1);
      const stop = end < 0 ? text.length : end + 1;
      push("string", text.slice(i, stop));
      i = stop;
    } else if (ch === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const stop = Math.min(j + 1, text.length);
      push("string", text.slice(i, stop));
      i = stop;
    } else if (ch === "$") {
      const m = /^\$(?:\{[^}\n]*\}?|\(\(?|[A-Za-z_][A-Za-z0-9_]*|[0-9#?@*!$-])?/.exec(text.slice(i))!;
      push("variable", m[0]);
      i += m[0].length;
    } else if (/[;&|<>()]/.test(ch)) {
      push("operator", ch);
      i++;
    } else if (/[A-Za-z_]/.test(ch) && atWordStart) {
      const word = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(text.slice(i))![0];
      const next = text[i + word.length];
      push(KEYWORDS.has(word) && (next === undefined || /[\s;&|()]/.test(next)) ? "keyword" : "text", word);
      i += word.length;
    } else {
      push("text", ch);
      i++;
    }
  }
  return out;
}
