/**
 * ACME for the web port (`acme.*`): the certificate is ordered with `acme-client` (HTTP-01), stored in the
 * database (`server_secrets` row `acme_cert`, key sealed like the CA key) so every replica serves the same
 * one, renewed once two thirds of its lifetime have passed, and swapped into the running web port. The
 * policy port keeps its internal-CA certificate.
 *
 * Replicas: one at a time orders (a lease row in `acme_lease`); the challenge answers live in
 * `acme_challenges`, so the validation request may reach any replica's HTTP-01 listener; every replica
 * checks the stored row each `acme.check_interval_minutes` and takes up a certificate another renewed.
 *
 * @module
 */
import https from "node:https";
import { isIP } from "node:net";
import acme from "acme-client";
import type { ServerConfig } from "../config/config.ts";
import type { Db } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import type { SecretStore } from "../pki/secret_store.ts";
import { decodeCertificate, x509 } from "../../shared/pki/csr.ts";

/** Row names in `server_secrets`. */
export const ACME_CERT = "acme_cert";
const ACME_ACCOUNT = "acme_account";
const LEASE_MINUTES = 10;

/** A certificate and key as PEM, ready for the web port. */
export interface AcmeCertificate {
  certPem: string;
  keyPem: string;
  notBefore: Date;
  notAfter: Date;
}

/** The running ACME job of one server. */
export interface AcmeManager {
  /** The certificate being served, once there is one. */
  current(): AcmeCertificate | undefined;
  /**
   * Takes up a certificate another replica stored, and orders a new one when none fits or two thirds of
   * the current one's lifetime have passed at `now`. Resolves true when the served certificate changed.
   */
  check(now?: Date): Promise<boolean>;
  /** The HTTP-01 listener's port. */
  readonly httpPort: number;
  stop(): Promise<void>;
}

/** What {@linkcode startAcme} needs. */
export interface AcmeOptions {
  config: ServerConfig;
  db: Db;
  log: Logger;
  store: SecretStore;
  /** Identifies this replica as the lease holder. */
  replicaId: string;
  /** Called with every new certificate (the web port's `setCertificate`). */
  install(cert: { certPem: string; keyPem: string }): void;
}

/** The names the ACME certificate must carry: `acme.hostnames`, else `server.hostnames`. */
export function acmeHostnames(config: ServerConfig): string[] {
  const names = config.acme.hostnames.length > 0 ? config.acme.hostnames : config.server.hostnames;
  return [...new Set(names.map((n) => n.trim().toLowerCase()).filter((n) => n !== ""))];
}

/**
 * Checks the ACME settings, starts the HTTP-01 listener and the renewal timer, and makes a first
 * check (a failure there is logged and retried by the timer; the web port keeps its certificate meanwhile).
 *
 * @throws {Error} naming the setting when the configuration cannot work
 */
export async function startAcme(options: AcmeOptions): Promise<AcmeManager> {
  const { config, db, log, store } = options;
  const settings = config.acme;
  const hostnames = acmeHostnames(config);
  if (settings.directoryUrl === "") {
    throw new Error("acme.enabled is true but acme.directory_url is empty: set the ACME directory URL");
  }
  if (hostnames.length === 0) {
    throw new Error(
      "acme.enabled is true but no names are set: list them in acme.hostnames (or server.hostnames)",
    );
  }
  const ip = hostnames.find((n) => isIP(n) !== 0);
  if (ip) throw new Error(`acme.hostnames: ${ip} is an IP address; ACME HTTP-01 certificates name DNS names`);
  if ((settings.eabKid === "") !== (settings.eabHmacKey === "")) {
    throw new Error("acme.eab_kid and acme.eab_hmac_key: both must be set or neither");
  }
  if (settings.caFile !== "") {
    let ca: string;
    try {
      ca = await Deno.readTextFile(settings.caFile);
    } catch (err) {
      throw new Error(`acme.ca_file ${settings.caFile} cannot be read: ${(err as Error).message}`);
    }
    acme.axios.defaults.httpsAgent = new https.Agent({ ca });
  }

  const listener = Deno.serve({
    hostname: config.server.address || "0.0.0.0",
    port: settings.httpPort,
    onListen: () => {},
  }, async (req) => {
    const m = /^\/\.well-known\/acme-challenge\/([A-Za-z0-9_-]{1,255})$/.exec(new URL(req.url).pathname);
    if (req.method !== "GET" || !m) return new Response("not found\n", { status: 404 });
    const [row] = await db.query<{ key_authorization: string }>(
      "SELECT key_authorization FROM acme_challenges WHERE token = $1",
      [m[1]],
    );
    if (!row) return new Response("no such challenge\n", { status: 404 });
    return new Response(row.key_authorization, { headers: { "content-type": "application/octet-stream" } });
  });

  let current: AcmeCertificate | undefined;
  const serve = (cert: AcmeCertificate) => {
    current = cert;
    options.install(cert);
    log.info("web port certificate from ACME installed", {
      names: hostnames.join(","),
      not_after: cert.notAfter.toISOString(),
    });
  };

  const stored = async (): Promise<AcmeCertificate | undefined> => {
    const row = await store.get(ACME_CERT);
    if (!row) return undefined;
    const keyPem = new TextDecoder().decode(row.secret);
    row.secret.fill(0);
    return parse(row.publicPem, keyPem);
  };

  const order = async (): Promise<AcmeCertificate> => {
    const account = await store.getOrCreate(ACME_ACCOUNT, async () => ({
      publicPem: "",
      secret: new Uint8Array(await acme.crypto.createPrivateEcdsaKey()),
    }));
    const client = new acme.Client({
      directoryUrl: settings.directoryUrl,
      accountKey: new TextDecoder().decode(account.secret),
      externalAccountBinding: settings.eabKid
        ? { kid: settings.eabKid, hmacKey: settings.eabHmacKey }
        : undefined,
    });
    await client.createAccount({
      termsOfServiceAgreed: true,
      contact: settings.contact.map((c) => (c.includes(":") ? c : `mailto:${c}`)),
    });
    const certKey = await acme.crypto.createPrivateEcdsaKey();
    const [, csr] = await acme.crypto.createCsr({ commonName: hostnames[0], altNames: hostnames }, certKey);
    const chain = await client.auto({
      csr,
      termsOfServiceAgreed: true,
      challengePriority: ["http-01"],
      // The authority checks; checking first would need the public name to reach this host on port 80.
      skipChallengeVerification: true,
      challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
        await db.query(
          `INSERT INTO acme_challenges (token, key_authorization) VALUES ($1, $2)
           ON CONFLICT (token) DO UPDATE SET key_authorization = EXCLUDED.key_authorization`,
          [challenge.token, keyAuthorization],
        );
      },
      challengeRemoveFn: async (_authz, challenge) => {
        await db.query("DELETE FROM acme_challenges WHERE token = $1", [challenge.token]);
      },
    });
    const cert = parse(chain, certKey.toString());
    await store.put(ACME_CERT, chain, new TextEncoder().encode(cert.keyPem));
    return cert;
  };

  const due = (cert: AcmeCertificate, now: Date): boolean => {
    const life = cert.notAfter.getTime() - cert.notBefore.getTime();
    return now.getTime() >= cert.notBefore.getTime() + (life * 2) / 3 || !covers(cert, hostnames);
  };

  let running: Promise<boolean> | undefined;
  const check = (now = new Date()): Promise<boolean> =>
    running ??= (async () => {
      try {
        const inDb = await stored();
        let changed = false;
        if (inDb && inDb.certPem !== current?.certPem && !due(inDb, now)) {
          serve(inDb);
          changed = true;
        }
        if (current && !due(current, now)) return changed;
        if (!(await takeLease(db, options.replicaId))) return changed;
        try {
          // Another replica may have renewed while this one waited for the lease.
          const latest = await stored();
          if (latest && !due(latest, now)) {
            if (latest.certPem !== current?.certPem) serve(latest);
            return latest.certPem !== inDb?.certPem || changed;
          }
          serve(await order());
          return true;
        } finally {
          await db.query("DELETE FROM acme_lease WHERE holder = $1", [options.replicaId]).catch(() => {});
        }
      } finally {
        running = undefined;
      }
    })();

  const safeCheck = () =>
    check().catch((err) => log.error("ACME certificate check failed", { error: String(err) }));
  await safeCheck();
  const timer = setInterval(safeCheck, settings.checkIntervalMinutes * 60_000);
  return {
    current: () => current,
    check,
    httpPort: listener.addr.port,
    async stop() {
      clearInterval(timer);
      await running?.catch(() => {});
      await listener.shutdown();
    },
  };
}

async function takeLease(db: Db, holder: string): Promise<boolean> {
  const rows = await db.query(
    `INSERT INTO acme_lease (id, holder, expires_at) VALUES (1, $1, now() + make_interval(mins => $2))
     ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
       WHERE acme_lease.expires_at < now() OR acme_lease.holder = EXCLUDED.holder
     RETURNING holder`,
    [holder, LEASE_MINUTES],
  );
  return rows.length === 1;
}

function parse(chain: string, keyPem: string): AcmeCertificate {
  const leaf = decodeCertificate(chain);
  return { certPem: chain, keyPem, notBefore: leaf.notBefore, notAfter: leaf.notAfter };
}

function covers(cert: AcmeCertificate, hostnames: string[]): boolean {
  const san = decodeCertificate(cert.certPem).getExtension(x509.SubjectAlternativeNameExtension);
  const names = new Set(
    (san?.names.items ?? []).filter((n) => n.type === "dns").map((n) => n.value.toLowerCase()),
  );
  return hostnames.every((n) => names.has(n));
}
