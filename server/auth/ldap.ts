/**
 * LDAP directory login (ldapts): find the user with the service account, bind as them with the typed
 * password, read their name, e-mail and groups. The password is never stored; svc keeps a user row with
 * `source = 'ldap'` (created at the first login, refreshed at each) so roles can be bound to it.
 *
 * Every value put into a filter is escaped per RFC 4515, the connection is TLS (`ldaps://`, or `ldap://`
 * upgraded with StartTLS) verified against `ldap.ca_file`, and every step has a timeout. Failures carry a
 * kind, so the person logging in gets the same answer as for a wrong password while the log tells the
 * administrator what to fix.
 *
 * @module
 */
import { Client, InvalidCredentialsError } from "ldapts";
import type { ServerConfig } from "../config/config.ts";

/** What a failed directory login was. */
export type LdapFailure =
  | "unreachable"
  | "bad_bind"
  | "not_found"
  | "ambiguous"
  | "wrong_password"
  | "refused_username";

/** A failed directory login; `message` is for the administrator (logged), never for the client. */
export class LdapError extends Error {
  constructor(readonly kind: LdapFailure, message: string) {
    super(message);
    this.name = "LdapError";
  }
}

/** The directory's view of a user who just proved their password. */
export interface LdapIdentity {
  dn: string;
  username: string;
  fullName: string;
  email: string;
  /** Group names and DNs, lower-cased. */
  groups: string[];
}

/** RFC 4515: `\`, `*`, `(`, `)` and NUL (and any non-printable byte) become `\xx`. */
export function escapeFilterValue(value: string): string {
  let out = "";
  for (const byte of new TextEncoder().encode(value)) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x20 || byte > 0x7e || "\\*()".includes(ch)
      ? `\\${byte.toString(16).padStart(2, "0")}`
      : ch;
  }
  return out;
}

/** `template` with `{name}` placeholders replaced by escaped values. */
export function fillFilter(template: string, values: Record<string, string>): string {
  return template.replace(
    /\{([a-z]+)\}/g,
    (all, name: string) => name in values ? escapeFilterValue(values[name]) : all,
  );
}

type LdapConfig = ServerConfig["ldap"];

/** Parses `ldap.group_map` lines (`directory group=>svc group`) into lower-cased directory keys. */
export function parseGroupMap(lines: readonly string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of lines) {
    const at = line.lastIndexOf("=>");
    if (at <= 0) throw new Error(`ldap.group_map: "${line}" needs the form directory-group=>svc-group`);
    map.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 2).trim());
  }
  return map;
}

/**
 * Authenticates `username` with `password` against the directory; throws {@link LdapError}. An empty
 * password is refused before any bind (many servers treat it as an anonymous bind that "succeeds").
 */
export async function ldapAuthenticate(
  cfg: LdapConfig,
  username: string,
  password: string,
): Promise<LdapIdentity> {
  if (password === "") throw new LdapError("wrong_password", "empty password");
  const clearText = cfg.url.startsWith("ldap://") && !cfg.startTls;
  if (clearText && !["127.0.0.1", "[::1]", "localhost"].includes(new URL(cfg.url).hostname)) {
    throw new LdapError(
      "unreachable",
      `ldap: ${cfg.url} without StartTLS would send passwords in clear text; use ldaps:// (or a loopback host)`,
    );
  }
  const tlsOptions = await tlsOptionsFor(cfg);
  const timeout = cfg.timeoutSeconds * 1000;
  const host = new URL(cfg.url).hostname;
  const open = async (): Promise<Client> => {
    // ldapts opens TLS at once whenever it is given TLS options: only for ldaps://; ldap:// upgrades below.
    const client = new Client({
      url: cfg.url,
      timeout,
      connectTimeout: timeout,
      strictDN: true,
      ...(cfg.url.startsWith("ldaps://") ? { tlsOptions } : {}),
    });
    try {
      if (cfg.url.startsWith("ldap://") && cfg.startTls) {
        // SNI carries names only; an address is checked against the certificate's IP entries through `host`.
        const isAddress = /^[0-9.]+$|^\[?[0-9a-f:]+\]?$/i.test(host);
        await client.startTLS({ ...tlsOptions, host, ...(isAddress ? {} : { servername: host }) });
      }
    } catch (err) {
      await client.unbind().catch(() => {});
      throw unreachable(cfg, err);
    }
    return client;
  };

  const service = await open();
  let entry: Record<string, unknown>;
  let groups: string[] = [];
  try {
    if (cfg.bindDn) {
      try {
        await service.bind(cfg.bindDn, cfg.bindPassword);
      } catch (err) {
        if (err instanceof InvalidCredentialsError) {
          throw new LdapError(
            "bad_bind",
            `ldap: the service bind as ${cfg.bindDn} was refused: check ldap.bind_dn and ldap.bind_password`,
          );
        }
        throw unreachable(cfg, err);
      }
    }
    const filter = fillFilter(cfg.userFilter, { username });
    let found;
    try {
      found = await service.search(cfg.userBase, {
        scope: "sub",
        filter,
        sizeLimit: 2,
        timeLimit: cfg.timeoutSeconds,
        attributes: [cfg.usernameAttribute, cfg.nameAttribute, cfg.emailAttribute],
      });
    } catch (err) {
      if ((err as { code?: number }).code === 4) {
        throw new LdapError("ambiguous", `ldap: more than one entry matches ${filter} under ${cfg.userBase}`);
      }
      throw unreachable(cfg, err);
    }
    if (found.searchEntries.length === 0) {
      throw new LdapError("not_found", `ldap: no entry matches ${filter} under ${cfg.userBase}`);
    }
    if (found.searchEntries.length > 1) {
      throw new LdapError(
        "ambiguous",
        `ldap: ${found.searchEntries.length} entries match ${filter}; make ldap.user_filter select one`,
      );
    }
    entry = found.searchEntries[0];
    if (cfg.groupBase) {
      const groupFilter = fillFilter(cfg.groupFilter, { dn: String(entry.dn), username });
      const result = await service.search(cfg.groupBase, {
        scope: "sub",
        filter: groupFilter,
        timeLimit: cfg.timeoutSeconds,
        attributes: [cfg.groupNameAttribute],
      }).catch((err) => {
        throw unreachable(cfg, err);
      });
      groups = result.searchEntries.flatMap((g) => [
        String(g.dn).toLowerCase(),
        ...values(g[cfg.groupNameAttribute]).map((v) => v.toLowerCase()),
      ]);
    }
  } finally {
    await service.unbind().catch(() => {});
  }

  const dn = String(entry.dn);
  const user = await open();
  try {
    await user.bind(dn, password);
  } catch (err) {
    if (err instanceof InvalidCredentialsError) {
      throw new LdapError("wrong_password", `ldap: wrong password for ${dn}`);
    }
    throw unreachable(cfg, err);
  } finally {
    await user.unbind().catch(() => {});
  }
  const directoryName = values(entry[cfg.usernameAttribute])[0] ?? username;
  if (directoryName.toLowerCase() !== username.toLowerCase()) {
    throw new LdapError(
      "refused_username",
      `ldap: ${dn} has ${cfg.usernameAttribute}=${directoryName}, not ${username}; fix ldap.user_filter`,
    );
  }
  return {
    dn,
    username: directoryName,
    fullName: values(entry[cfg.nameAttribute])[0] ?? "",
    email: values(entry[cfg.emailAttribute])[0] ?? "",
    groups,
  };
}

function values(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  return (Array.isArray(v) ? v : [v]).map((x) =>
    x instanceof Uint8Array ? new TextDecoder().decode(x) : String(x)
  );
}

async function tlsOptionsFor(cfg: LdapConfig): Promise<{ ca?: string; minVersion: "TLSv1.2" }> {
  if (!cfg.caFile) return { minVersion: "TLSv1.2" };
  try {
    return { ca: await Deno.readTextFile(cfg.caFile), minVersion: "TLSv1.2" };
  } catch (err) {
    throw new LdapError(
      "unreachable",
      `ldap: cannot read ldap.ca_file ${cfg.caFile}: ${(err as Error).message}`,
    );
  }
}

function unreachable(cfg: LdapConfig, err: unknown): LdapError {
  if (err instanceof LdapError) return err;
  return new LdapError(
    "unreachable",
    `ldap: cannot use the directory at ${cfg.url}: ${(err as Error)?.message ?? err} ` +
      "(check ldap.url, that the server answers, and that its certificate chains to ldap.ca_file)",
  );
}
