/**
 * Firewalld rich rules (`rule family="ipv4" source address="10.0.0.0/8" service name="ssh" accept`) parsed into
 * a structure and checked value by value, the same way on the server (when content is saved) and on the agent
 * (before anything is written). A rule that parses here is rendered from the structure only: as the canonical
 * rich-language text firewalld itself prints, and as the `<rule>` element of a zone file. Nothing of the
 * original text is copied through, so a quoted value cannot carry markup, shell or a second rule.
 *
 * Every attribute value has a type (address, MAC, ipset name, service name, port, protocol, log prefix, log
 * level, limit, reject type, mark, priority) with its own character set and range. Words that are neither an
 * element nor a known attribute are refused with the word named.
 *
 * @module
 */

import {
  cidr,
  firewalldName,
  ipAddress,
  portProtocol,
  portSpec,
  singleLine,
} from "./policy_types/sanitizers.ts";

/** Where traffic comes from or goes to. */
export interface RichRuleAddress {
  address?: string;
  mac?: string;
  ipset?: string;
  invert: boolean;
}

/** A rate limit such as `3/m`. */
export interface RichRuleLimit {
  /** Normalised to `<rate>/<s|m|h|d>`. */
  value: string;
}

/** The one match element of a rule. */
export type RichRuleElement =
  | { kind: "service"; name: string }
  | { kind: "port" | "source-port"; port: string; protocol: string }
  | { kind: "protocol"; value: string }
  | { kind: "icmp-block" | "icmp-type"; name: string }
  | { kind: "masquerade" }
  | { kind: "forward-port"; port: string; protocol: string; toPort?: string; toAddr?: string }
  | { kind: "tcp-mss-clamp"; value?: string };

/** Logging of matching packets. */
export type RichRuleLog =
  | { kind: "log"; prefix?: string; level?: string; limit?: RichRuleLimit }
  | { kind: "nflog"; group?: string; prefix?: string; queueSize?: string; limit?: RichRuleLimit };

/** What happens to matching packets. */
export type RichRuleAction =
  | { kind: "accept" | "drop"; limit?: RichRuleLimit }
  | { kind: "reject"; type?: string; limit?: RichRuleLimit }
  | { kind: "mark"; set: string; limit?: RichRuleLimit };

/** A parsed rich rule. */
export interface RichRule {
  family?: "ipv4" | "ipv6";
  /** -32768..32767; 0 when not given. */
  priority: number;
  source?: RichRuleAddress;
  destination?: RichRuleAddress;
  element?: RichRuleElement;
  log?: RichRuleLog;
  audit?: { limit?: RichRuleLimit };
  action?: RichRuleAction;
}

/** A rich rule that does not parse or holds a value of the wrong kind; the message names the part. */
export class RichRuleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RichRuleError";
  }
}

/** Longest accepted rich rule, in characters. */
export const MAX_RICH_RULE_LENGTH = 4096;

const LOG_LEVELS = ["emerg", "alert", "crit", "error", "warning", "notice", "info", "debug"];
const REJECT_TYPES: Record<"ipv4" | "ipv6", readonly string[]> = {
  ipv4: [
    "icmp-host-prohibited",
    "host-prohib",
    "icmp-net-unreachable",
    "net-unreach",
    "icmp-host-unreachable",
    "host-unreach",
    "icmp-port-unreachable",
    "port-unreach",
    "icmp-proto-unreachable",
    "proto-unreach",
    "icmp-net-prohibited",
    "net-prohib",
    "tcp-reset",
    "tcp-rst",
    "icmp-admin-prohibited",
    "admin-prohib",
  ],
  ipv6: [
    "icmp6-adm-prohibited",
    "adm-prohibited",
    "icmp6-no-route",
    "no-route",
    "icmp6-addr-unreachable",
    "addr-unreach",
    "icmp6-port-unreachable",
    "port-unreach",
    "tcp-reset",
  ],
};

/** Which attributes each element takes. */
const ATTRIBUTES: Record<string, readonly string[]> = {
  rule: ["family", "priority"],
  source: ["address", "mac", "ipset"],
  destination: ["address", "ipset"],
  service: ["name"],
  port: ["port", "protocol"],
  "source-port": ["port", "protocol"],
  protocol: ["value"],
  "icmp-block": ["name"],
  "icmp-type": ["name"],
  masquerade: [],
  "forward-port": ["port", "protocol", "to-port", "to-addr"],
  "tcp-mss-clamp": ["value"],
  log: ["prefix", "level"],
  nflog: ["group", "prefix", "queue-size"],
  audit: [],
  accept: [],
  drop: [],
  reject: ["type"],
  mark: ["set"],
  limit: ["value"],
};

/** Elements (words without `=`): those that take attributes, and the negation of a source or destination. */
const ELEMENTS = new Set([...Object.keys(ATTRIBUTES), "not", "NOT"]);

const MATCH_ELEMENTS = new Set([
  "service",
  "port",
  "source-port",
  "protocol",
  "icmp-block",
  "icmp-type",
  "masquerade",
  "forward-port",
  "tcp-mss-clamp",
]);
const ACTIONS = new Set(["accept", "drop", "reject", "mark"]);

interface Token {
  word: string;
  value?: string;
}

// deno-lint-ignore no-control-regex
const UNSAFE_TEXT = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff\ufffe\uffff]/;

function show(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === " " || text[i] === "\t") {
      i++;
      continue;
    }
    const start = i;
    while (i < text.length && /[A-Za-z-]/.test(text[i])) i++;
    const word = text.slice(start, i);
    if (text[i] !== "=") {
      if (i < text.length && text[i] !== " " && text[i] !== "\t") {
        let end = i;
        while (end < text.length && text[end] !== " " && text[end] !== "\t") end++;
        throw new RichRuleError(`unknown token ${show(text.slice(start, end))}`);
      }
      if (!ELEMENTS.has(word)) throw new RichRuleError(`unknown token ${show(word)}`);
      tokens.push({ word });
      continue;
    }
    if (word === "") throw new RichRuleError(`unknown token ${show(text.slice(start, start + 20))}`);
    i++;
    let value: string;
    const quote = text[i];
    if (quote === '"' || quote === "'") {
      const end = text.indexOf(quote, i + 1);
      if (end < 0) throw new RichRuleError(`the value of ${word} has no closing ${quote}`);
      value = text.slice(i + 1, end);
      i = end + 1;
      if (i < text.length && text[i] !== " " && text[i] !== "\t") {
        throw new RichRuleError(`the quoted value of ${word} must be followed by a space`);
      }
    } else {
      const start = i;
      while (i < text.length && text[i] !== " " && text[i] !== "\t") {
        if (text[i] === '"' || text[i] === "'") {
          throw new RichRuleError(`the value of ${word} has a stray quote: quote the whole value`);
        }
        i++;
      }
      value = text.slice(start, i);
    }
    if (value === "") throw new RichRuleError(`attribute ${word} needs a value`);
    tokens.push({ word, value });
  }
  return tokens;
}

/** Checkers per attribute value type: undefined when fine, else what is wrong. */
function checkPrefix(value: string): string | undefined {
  if ([...value].length > 127) return "must be at most 127 characters";
  // No quotes, backslashes or '=' (firewalld's own lexer splits a word at every '=').
  return /^[A-Za-z0-9 _.,:;\/+@#%()[\]-]*$/.test(value)
    ? undefined
    : "may contain only letters, digits, spaces and _ . , : ; / + @ # % ( ) [ ] -";
}

function checkUint(max: number): (value: string) => string | undefined {
  return (value) =>
    /^\d{1,10}$/.test(value) && Number(value) <= max ? undefined : `must be a whole number from 0 to ${max}`;
}

function checkUint32Text(value: string): boolean {
  if (/^0x[0-9A-Fa-f]{1,8}$/.test(value)) return true;
  return /^\d{1,10}$/.test(value) && Number(value) <= 0xffffffff;
}

function checkProtocolValue(value: string): string | undefined {
  if (/^\d{1,3}$/.test(value)) {
    return Number(value) <= 255 ? undefined : "must be a protocol number up to 255";
  }
  return /^[a-z][a-z0-9.+-]{0,31}$/.test(value)
    ? undefined
    : "must be a protocol name from /etc/protocols such as gre, or a number from 0 to 255";
}

function checkIpsetName(value: string): string | undefined {
  return /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,30}$/.test(value)
    ? undefined
    : "must be an ipset name: letters, digits, '_', '.', ':' and '-' (at most 31 characters)";
}

function checkMac(value: string): string | undefined {
  return /^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$/.test(value)
    ? undefined
    : "must be a MAC address such as 00:11:22:33:44:55";
}

function parseLimit(value: string): RichRuleLimit {
  const m = /^(\d{1,9})\/(s|m|h|d|second|minute|hour|day)$/.exec(value);
  if (!m) throw new RichRuleError(`limit value ${show(value)} must be a rate such as 3/m (per s, m, h or d)`);
  const rate = Number(m[1]);
  const unit = m[2][0];
  if (rate < 1) throw new RichRuleError(`limit value ${show(value)} must allow at least 1 packet`);
  if (rate === 1 && unit === "d") {
    throw new RichRuleError("limit value 1/d is too slow for the kernel; use 1/h or more");
  }
  return { value: `${rate}/${unit}` };
}

function familyOf(address: string): "ipv4" | "ipv6" {
  return address.includes(":") ? "ipv6" : "ipv4";
}

/**
 * Parses a rich rule.
 *
 * @throws {RichRuleError} naming the token or value that is wrong and what is expected.
 */
export function parseRichRule(text: string): RichRule {
  if ([...text].length > MAX_RICH_RULE_LENGTH) {
    throw new RichRuleError(`must be at most ${MAX_RICH_RULE_LENGTH} characters`);
  }
  const line = singleLine(text);
  if (line) throw new RichRuleError(`must be one line of printable text: it ${line}`);
  const bad = UNSAFE_TEXT.exec(text);
  if (bad) {
    const code = bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
    throw new RichRuleError(`must be one line of printable text (found U+${code})`);
  }
  const tokens = tokenize(text);
  if (tokens.length === 0) throw new RichRuleError('is empty: a rich rule starts with "rule"');
  if (tokens[0].word !== "rule" || tokens[0].value !== undefined) {
    throw new RichRuleError(`must start with "rule", not ${show(tokens[0].word)}`);
  }
  const rule: RichRule = { priority: 0 };
  let i = 1;
  // Attributes of `rule` itself.
  const seen = new Set<string>();
  while (i < tokens.length && tokens[i].value !== undefined) {
    const { word, value } = tokens[i++];
    if (!ATTRIBUTES.rule.includes(word)) {
      throw new RichRuleError(`attribute ${word}= is not an attribute of "rule" (only family and priority)`);
    }
    if (seen.has(word)) throw new RichRuleError(`rule ${word}= is given twice`);
    seen.add(word);
    if (word === "family") {
      if (value !== "ipv4" && value !== "ipv6") {
        throw new RichRuleError(`rule family ${show(value!)} must be ipv4 or ipv6`);
      }
      rule.family = value;
    } else {
      if (!/^-?\d{1,5}$/.test(value!) || Number(value) < -32768 || Number(value) > 32767) {
        throw new RichRuleError(`rule priority ${show(value!)} must be a whole number from -32768 to 32767`);
      }
      rule.priority = Number(value);
    }
  }

  while (i < tokens.length) {
    const element = tokens[i++];
    if (element.value !== undefined) {
      throw new RichRuleError(`attribute ${element.word}= must follow an element such as service or port`);
    }
    const name = element.word;
    if (name === "rule") throw new RichRuleError('"rule" may appear only once, at the start');
    if (name === "limit" || name === "not" || name === "NOT") {
      throw new RichRuleError(`"${name}" must follow the element it belongs to`);
    }
    let invert = false;
    if ((name === "source" || name === "destination") && /^not$/i.test(tokens[i]?.word ?? "")) {
      invert = true;
      i++;
    }
    const attrs = new Map<string, string>();
    while (i < tokens.length && tokens[i].value !== undefined) {
      const { word, value } = tokens[i++];
      if (!ATTRIBUTES[name].includes(word)) {
        const allowed = ATTRIBUTES[name];
        throw new RichRuleError(
          `attribute ${word}= does not belong to "${name}"` +
            (allowed.length ? ` (it takes ${allowed.join(", ")})` : " (it takes no attributes)"),
        );
      }
      if (attrs.has(word)) throw new RichRuleError(`${name} ${word}= is given twice`);
      attrs.set(word, value!);
    }
    let limit: RichRuleLimit | undefined;
    if (tokens[i]?.word === "limit" && tokens[i].value === undefined) {
      if (!["log", "nflog", "audit", "accept", "drop", "reject", "mark"].includes(name)) {
        throw new RichRuleError(`"limit" cannot follow "${name}"`);
      }
      const value = tokens[i + 1];
      if (value?.word !== "value" || value.value === undefined) {
        throw new RichRuleError('"limit" needs value=<rate>, e.g. limit value="3/m"');
      }
      limit = parseLimit(value.value);
      i += 2;
    }
    addPart(rule, name, attrs, invert, limit);
  }
  checkRule(rule);
  return rule;
}

function need(element: string, attrs: Map<string, string>, attr: string): string {
  const value = attrs.get(attr);
  if (value === undefined) throw new RichRuleError(`"${element}" needs ${attr}=`);
  return value;
}

function valueIs(
  element: string,
  attr: string,
  value: string,
  check: (v: string) => string | undefined,
): string {
  const problem = check(value);
  if (problem) throw new RichRuleError(`${element} ${attr} ${show(value)} ${problem}`);
  return value;
}

function addPart(
  rule: RichRule,
  name: string,
  attrs: Map<string, string>,
  invert: boolean,
  limit: RichRuleLimit | undefined,
): void {
  const once = (taken: unknown, what: string) => {
    if (taken) throw new RichRuleError(`a rule has at most one ${what} (found another "${name}")`);
  };
  if (name === "source" || name === "destination") {
    once(rule[name], `"${name}"`);
    const given = [...attrs.keys()];
    if (given.length !== 1) {
      throw new RichRuleError(`"${name}" needs exactly one of ${ATTRIBUTES[name].join(", ")}`);
    }
    const part: RichRuleAddress = { invert };
    if (attrs.has("address")) part.address = valueIs(name, "address", attrs.get("address")!, cidr);
    if (attrs.has("mac")) part.mac = valueIs(name, "mac", attrs.get("mac")!, checkMac).toUpperCase();
    if (attrs.has("ipset")) part.ipset = valueIs(name, "ipset", attrs.get("ipset")!, checkIpsetName);
    rule[name] = part;
    return;
  }
  if (MATCH_ELEMENTS.has(name)) {
    once(rule.element, "match element (service, port, protocol, …)");
    switch (name) {
      case "service":
        rule.element = { kind: name, name: valueIs(name, "name", need(name, attrs, "name"), firewalldName) };
        return;
      case "icmp-block":
      case "icmp-type":
        rule.element = { kind: name, name: valueIs(name, "name", need(name, attrs, "name"), firewalldName) };
        return;
      case "port":
      case "source-port":
        rule.element = {
          kind: name,
          port: valueIs(name, "port", need(name, attrs, "port"), portSpec),
          protocol: valueIs(name, "protocol", need(name, attrs, "protocol"), portProtocol),
        };
        return;
      case "protocol":
        rule.element = {
          kind: name,
          value: valueIs(name, "value", need(name, attrs, "value"), checkProtocolValue),
        };
        return;
      case "masquerade":
        rule.element = { kind: name };
        return;
      case "forward-port": {
        const toPort = attrs.get("to-port");
        const toAddr = attrs.get("to-addr");
        if (toPort === undefined && toAddr === undefined) {
          throw new RichRuleError('"forward-port" needs to-port=, to-addr= or both');
        }
        rule.element = {
          kind: name,
          port: valueIs(name, "port", need(name, attrs, "port"), portSpec),
          protocol: valueIs(name, "protocol", need(name, attrs, "protocol"), portProtocol),
          ...(toPort === undefined ? {} : { toPort: valueIs(name, "to-port", toPort, portSpec) }),
          ...(toAddr === undefined ? {} : { toAddr: valueIs(name, "to-addr", toAddr, ipAddress) }),
        };
        return;
      }
      case "tcp-mss-clamp": {
        const value = attrs.get("value");
        rule.element = value === undefined ? { kind: name } : {
          kind: name,
          value: valueIs(
            name,
            "value",
            value,
            (v) =>
              v === "pmtu" || (/^\d{3,5}$/.test(v) && Number(v) >= 536 && Number(v) <= 65535)
                ? undefined
                : "must be pmtu or a segment size from 536 to 65535",
          ),
        };
        return;
      }
    }
  }
  if (name === "log") {
    once(rule.log, "log or nflog");
    const prefix = attrs.get("prefix");
    const level = attrs.get("level");
    rule.log = {
      kind: "log",
      ...(prefix === undefined ? {} : { prefix: valueIs(name, "prefix", prefix, checkPrefix) }),
      ...(level === undefined ? {} : {
        level: valueIs(
          name,
          "level",
          level,
          (v) => LOG_LEVELS.includes(v) ? undefined : `must be one of ${LOG_LEVELS.join(", ")}`,
        ),
      }),
      ...(limit ? { limit } : {}),
    };
    return;
  }
  if (name === "nflog") {
    once(rule.log, "log or nflog");
    const group = attrs.get("group");
    const prefix = attrs.get("prefix");
    const queueSize = attrs.get("queue-size");
    rule.log = {
      kind: "nflog",
      ...(group === undefined ? {} : { group: valueIs(name, "group", group, checkUint(65535)) }),
      ...(prefix === undefined ? {} : { prefix: valueIs(name, "prefix", prefix, checkPrefix) }),
      ...(queueSize === undefined
        ? {}
        : { queueSize: valueIs(name, "queue-size", queueSize, checkUint(65535)) }),
      ...(limit ? { limit } : {}),
    };
    return;
  }
  if (name === "audit") {
    once(rule.audit, '"audit"');
    rule.audit = limit ? { limit } : {};
    return;
  }
  if (ACTIONS.has(name)) {
    once(rule.action, "action (accept, drop, reject or mark)");
    if (name === "reject") {
      const type = attrs.get("type");
      rule.action = { kind: "reject", ...(type === undefined ? {} : { type }), ...(limit ? { limit } : {}) };
    } else if (name === "mark") {
      const set = need(name, attrs, "set");
      valueIs(name, "set", set, (v) => {
        const parts = v.split("/");
        return parts.length <= 2 && parts.every(checkUint32Text)
          ? undefined
          : "must be a 32-bit mark such as 0x10 or 16/0xff";
      });
      rule.action = { kind: "mark", set, ...(limit ? { limit } : {}) };
    } else {
      rule.action = { kind: name as "accept" | "drop", ...(limit ? { limit } : {}) };
    }
  }
}

function checkRule(rule: RichRule): void {
  const { family, element, action } = rule;
  for (const side of ["source", "destination"] as const) {
    const address = rule[side]?.address;
    if (address === undefined) continue;
    if (!family) throw new RichRuleError(`a ${side} address needs rule family="ipv4" or "ipv6"`);
    if (familyOf(address) !== family) {
      throw new RichRuleError(`${side} address ${show(address)} is not an ${family} address`);
    }
  }
  if (element?.kind === "forward-port") {
    if (!family) throw new RichRuleError('"forward-port" needs rule family="ipv4" or "ipv6"');
    if (element.toAddr && familyOf(element.toAddr) !== family) {
      throw new RichRuleError(`forward-port to-addr ${show(element.toAddr)} is not an ${family} address`);
    }
  }
  if (!element && (!rule.log || rule.priority === 0)) {
    if (!action) throw new RichRuleError("needs a match element (service, port, …) or an action (accept, …)");
    if (!rule.source && !rule.destination && rule.priority === 0) {
      throw new RichRuleError("needs a match element, a source or a destination");
    }
  }
  const noAction = ["icmp-block", "forward-port", "masquerade", "tcp-mss-clamp"];
  if (element && noAction.includes(element.kind)) {
    if (action) {
      throw new RichRuleError(`"${element.kind}" cannot be combined with an action ("${action.kind}")`);
    }
  } else if (!rule.log && !rule.audit && !action) {
    throw new RichRuleError("needs an action (accept, drop, reject, mark), log or audit");
  }
  if (element?.kind === "masquerade" && rule.source?.mac) {
    throw new RichRuleError('"masquerade" cannot match a source mac');
  }
  if (rule.audit && !(action && ["accept", "drop", "reject"].includes(action.kind))) {
    throw new RichRuleError('"audit" needs an accept, drop or reject action');
  }
  if (action?.kind === "reject" && action.type !== undefined) {
    if (!family) throw new RichRuleError('reject type= needs rule family="ipv4" or "ipv6"');
    if (!REJECT_TYPES[family].includes(action.type)) {
      throw new RichRuleError(
        `reject type ${show(action.type)} is not an ${family} reject type (one of ${
          REJECT_TYPES[family].join(", ")
        })`,
      );
    }
  }
}

/** The problem with a rich rule, or undefined when it parses and every value is of its kind (a checker). */
export function richRuleProblem(text: string): string | undefined {
  try {
    parseRichRule(text);
    return undefined;
  } catch (err) {
    if (err instanceof RichRuleError) return err.message;
    throw err;
  }
}

function quoted(attr: string, value: string): string {
  return `${attr}="${value}"`;
}

function limitText(limit: RichRuleLimit | undefined): string {
  return limit ? ` limit value="${limit.value}"` : "";
}

/**
 * The canonical rich-language text of a rule, in the order and quoting firewalld prints it
 * (`firewall-cmd --list-rich-rules`), so a rule can be compared with what firewalld reports. Every value
 * was checked by {@link parseRichRule}, none contains a quote.
 */
export function formatRichRule(rule: RichRule): string {
  const parts = ["rule"];
  if (rule.priority) parts.push(`priority="${rule.priority}"`);
  if (rule.family) parts.push(quoted("family", rule.family));
  for (const side of ["source", "destination"] as const) {
    const a = rule[side];
    if (!a) continue;
    const head = a.invert ? `${side} NOT` : side;
    if (a.address !== undefined) parts.push(`${head} ${quoted("address", a.address)}`);
    else if (a.mac !== undefined) parts.push(`${head} ${quoted("mac", a.mac)}`);
    else if (a.ipset !== undefined) parts.push(`${head} ${quoted("ipset", a.ipset)}`);
  }
  const e = rule.element;
  if (e) {
    switch (e.kind) {
      case "service":
      case "icmp-block":
      case "icmp-type":
        parts.push(`${e.kind} ${quoted("name", e.name)}`);
        break;
      case "port":
      case "source-port":
        parts.push(`${e.kind} ${quoted("port", e.port)} ${quoted("protocol", e.protocol)}`);
        break;
      case "protocol":
        parts.push(`protocol ${quoted("value", e.value)}`);
        break;
      case "masquerade":
        parts.push("masquerade");
        break;
      case "forward-port":
        parts.push(
          `forward-port ${quoted("port", e.port)} ${quoted("protocol", e.protocol)}` +
            (e.toPort ? ` ${quoted("to-port", e.toPort)}` : "") +
            (e.toAddr ? ` ${quoted("to-addr", e.toAddr)}` : ""),
        );
        break;
      case "tcp-mss-clamp":
        parts.push(e.value ? `tcp-mss-clamp ${quoted("value", e.value)}` : "tcp-mss-clamp");
        break;
    }
  }
  const log = rule.log;
  if (log?.kind === "log") {
    parts.push(
      "log" + (log.prefix ? ` ${quoted("prefix", log.prefix)}` : "") +
        (log.level ? ` ${quoted("level", log.level)}` : "") +
        limitText(log.limit),
    );
  } else if (log?.kind === "nflog") {
    parts.push(
      "nflog" + (log.group ? ` ${quoted("group", log.group)}` : "") +
        (log.prefix ? ` ${quoted("prefix", log.prefix)}` : "") +
        (log.queueSize ? ` ${quoted("queue-size", log.queueSize)}` : "") + limitText(log.limit),
    );
  }
  if (rule.audit) parts.push(`audit${limitText(rule.audit.limit)}`);
  const a = rule.action;
  if (a) {
    if (a.kind === "reject") {
      parts.push(`reject${a.type ? ` ${quoted("type", a.type)}` : ""}${limitText(a.limit)}`);
    } else if (a.kind === "mark") parts.push(`mark set=${a.set}${limitText(a.limit)}`);
    else parts.push(`${a.kind}${limitText(a.limit)}`);
  }
  return parts.join(" ");
}

/** An element of a zone file, written by an XML writer that escapes every attribute value. */
export interface RichRuleXml {
  name: string;
  attrs: Record<string, string>;
  children: RichRuleXml[];
}

function el(
  name: string,
  attrs: Record<string, string | undefined> = {},
  children: RichRuleXml[] = [],
): RichRuleXml {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== "") clean[k] = v;
  return { name, attrs: clean, children };
}

function limitEl(limit: RichRuleLimit | undefined): RichRuleXml[] {
  return limit ? [el("limit", { value: limit.value })] : [];
}

/** The `<rule>` element of a zone file for a parsed rule. */
export function richRuleElement(rule: RichRule): RichRuleXml {
  const children: RichRuleXml[] = [];
  for (const side of ["source", "destination"] as const) {
    const a = rule[side];
    if (a) {
      children.push(
        el(side, { address: a.address, mac: a.mac, ipset: a.ipset, invert: a.invert ? "True" : undefined }),
      );
    }
  }
  const e = rule.element;
  if (e) {
    switch (e.kind) {
      case "service":
      case "icmp-block":
      case "icmp-type":
        children.push(el(e.kind, { name: e.name }));
        break;
      case "port":
      case "source-port":
        children.push(el(e.kind, { port: e.port, protocol: e.protocol }));
        break;
      case "protocol":
        children.push(el("protocol", { value: e.value }));
        break;
      case "masquerade":
        children.push(el("masquerade"));
        break;
      case "forward-port":
        children.push(
          el("forward-port", {
            port: e.port,
            protocol: e.protocol,
            "to-port": e.toPort,
            "to-addr": e.toAddr,
          }),
        );
        break;
      case "tcp-mss-clamp":
        children.push(el("tcp-mss-clamp", { value: e.value }));
        break;
    }
  }
  const log = rule.log;
  if (log?.kind === "log") {
    children.push(el("log", { prefix: log.prefix, level: log.level }, limitEl(log.limit)));
  }
  if (log?.kind === "nflog") {
    children.push(
      el("nflog", { group: log.group, prefix: log.prefix, "queue-size": log.queueSize }, limitEl(log.limit)),
    );
  }
  if (rule.audit) children.push(el("audit", {}, limitEl(rule.audit.limit)));
  const a = rule.action;
  if (a) {
    const attrs = a.kind === "reject" ? { type: a.type } : a.kind === "mark" ? { set: a.set } : {};
    children.push(el(a.kind, attrs, limitEl(a.limit)));
  }
  return el(
    "rule",
    { family: rule.family, priority: rule.priority ? String(rule.priority) : undefined },
    children,
  );
}

/** The canonical text of a rich rule given as text (parsing it), for comparisons. */
export function canonicalRichRule(text: string): string {
  return formatRichRule(parseRichRule(text));
}
