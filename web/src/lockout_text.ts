/**
 * The SessionAccess lockout guard's refusal as a person reads it. The server's message is one sentence for
 * scripts ("… name (alice, %support) may log in Mon 00:00–Mon 09:00 (UTC); check the rules, or confirm with a
 * lockout_reason to go ahead"); the console takes it apart into where, who and when, names groups as groups
 * ("%support" is the group support) and leaves the API's field name to the API.
 */

/** A lockout refusal taken apart. */
export interface LockoutText {
  /** What would lock whom out, as a sentence: "Releasing this policy would lock node group "lab" out". */
  where: string;
  /** The accounts the rules name, as words ("alice", "the group support"). */
  accounts: string[];
  /** The first time ranges nobody named may log in ("Mon 00:00–Mon 09:00"). */
  times: string[];
  /** How many more ranges there are. */
  more: number;
  /** The time zone the times are in. */
  zone: string;
}

const SENTENCE = new RegExp(
  "^(?<where>.*): none of the accounts the SessionAccess rules name \\((?<who>.*)\\) may log in " +
    "(?<when>.*?)(?: and (?<more>\\d+) more)? \\((?<zone>[^()]*)\\); check the rules, or confirm with a " +
    "lockout_reason to go ahead$",
  "s",
);

/** A subject of a SessionAccess rule as a label: `%staff` is "group staff", anything else a user name. */
export function accountLabel(subject: string): string {
  return subject.startsWith("%") ? `group ${subject.slice(1)}` : subject;
}

/** A subject inside a sentence: "the group staff", or the user name. */
export function accountWords(subject: string): string {
  return subject.startsWith("%") ? `the ${accountLabel(subject)}` : subject;
}

/** The refusal taken apart, or undefined when the server worded it differently. */
export function parseLockout(message: string): LockoutText | undefined {
  const m = SENTENCE.exec(message.trim());
  if (!m?.groups) return undefined;
  const g = m.groups;
  return {
    where: g.where.charAt(0).toUpperCase() + g.where.slice(1),
    accounts: g.who.split(", ").filter(Boolean).map(accountWords),
    times: g.when.split(", ").filter(Boolean),
    more: g.more ? Number(g.more) : 0,
    zone: g.zone,
  };
}

/**
 * A refusal this module cannot take apart, still without the API's words: the closing hint about
 * `lockout_reason` goes, and `%group` subjects read as groups.
 */
export function plainLockoutMessage(message: string): string {
  const text = message.replace(/;?\s*check the rules, or confirm with a lockout_reason to go ahead\.?$/, "")
    .replace(/(^|[\s(,])%([^\s,()]+)/g, (_m, before: string, name: string) => `${before}the group ${name}`);
  return text.charAt(0).toUpperCase() + text.slice(1) + ".";
}

/** "a, b and c". */
export function listWords(words: string[]): string {
  if (words.length <= 1) return words.join("");
  return `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}
