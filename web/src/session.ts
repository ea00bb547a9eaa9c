/**
 * Who is logged in, and what they may do. Loaded from `GET /api/v1/auth/me`; used only to hide or disable
 * controls — the server checks every request itself.
 */
import { api } from "./api.ts";

/** The current user as the UI needs it. */
export interface CurrentUser {
  id: string;
  username: string;
  fullName: string;
  email: string;
  source: string;
}

/** The caller's second factors as `/auth/me` reports them. */
export interface SecondFactorState {
  totp: boolean;
  backupCodesLeft: number;
  webauthn: number;
  /** The MFA policy requires a factor and there is none: the console shows only the enrolment page. */
  enrolmentRequired: boolean;
}

/** The `/auth/me` answer, normalized. */
export interface Me {
  user: CurrentUser;
  permissions: ReadonlySet<string>;
  features: ReadonlySet<string>;
  secondFactor: SecondFactorState;
}

/** What the first login step asks for next, when the account has a second factor. */
export interface SecondFactorChallenge {
  token: string;
  methods: string[];
  expiresAt: string;
}

/** Accepts the server's answer whether the user fields are nested under `user` or not. */
export function normalizeMe(raw: Record<string, unknown>): Me {
  const u = (raw.user && typeof raw.user === "object" ? raw.user : raw) as Record<string, unknown>;
  const list = (v: unknown): string[] => Array.isArray(v) ? v.map(String) : [];
  const sf = (raw.second_factor && typeof raw.second_factor === "object" ? raw.second_factor : {}) as Record<
    string,
    unknown
  >;
  const features = Array.isArray(raw.features)
    ? list(raw.features)
    : raw.features && typeof raw.features === "object"
    ? Object.entries(raw.features as Record<string, unknown>).filter(([, on]) => on === true).map(([k]) => k)
    : [];
  return {
    user: {
      id: String(u.id ?? ""),
      username: String(u.username ?? ""),
      fullName: String(u.full_name ?? u.fullName ?? ""),
      email: String(u.email ?? ""),
      source: String(u.source ?? "local"),
    },
    permissions: new Set(list(raw.permissions ?? u.permissions)),
    features: new Set(features),
    secondFactor: {
      totp: sf.totp === true,
      backupCodesLeft: Number(sf.backup_codes_left ?? 0),
      webauthn: Number(sf.webauthn ?? 0),
      enrolmentRequired: sf.enrolment_required === true,
    },
  };
}

/** The session store: one per page load. Fires `change` when the user logs in or out. */
class Session extends EventTarget {
  me: Me | undefined;

  /** True when the current user holds `permission` (`resource:action`). */
  can(permission: string): boolean {
    return this.me?.permissions.has(permission) ?? false;
  }

  /** True when the current user holds any of `permissions`. */
  canAny(...permissions: string[]): boolean {
    return permissions.some((p) => this.can(p));
  }

  /** Loads `/auth/me`; resolves false when nobody is logged in. */
  async load(): Promise<boolean> {
    try {
      this.me = normalizeMe(await api.call("GET /api/v1/auth/me"));
    } catch (err) {
      if ((err as { status?: number }).status === 401) {
        this.me = undefined;
        return false;
      }
      throw err;
    }
    this.dispatchEvent(new Event("change"));
    return true;
  }

  /**
   * Logs in with a password, then loads the user; resolves with the second-factor challenge instead when the
   * account has one (then call {@link secondFactor}).
   */
  async login(username: string, password: string): Promise<SecondFactorChallenge | undefined> {
    const answer = await api.call("POST /api/v1/auth/login", { body: { username, password } });
    if (answer?.second_factor_required) {
      const sf = answer.second_factor_required;
      return { token: sf.token, methods: sf.methods, expiresAt: sf.expires_at };
    }
    api.sessionStarted();
    await this.load();
    return undefined;
  }

  /** The second login step: a code from the authenticator app, or a backup code. */
  async secondFactor(token: string, proof: { code?: string; backup_code?: string }): Promise<void> {
    await api.call("POST /api/v1/auth/login/second-factor", { body: { token, ...proof } });
    api.sessionStarted();
    await this.load();
  }

  /** Logs out (server revokes the refresh token and clears the cookies). */
  async logout(): Promise<void> {
    try {
      await api.call("POST /api/v1/auth/logout");
    } finally {
      this.me = undefined;
      this.dispatchEvent(new Event("change"));
    }
  }
}

/** The session the whole app shares. */
export const session: Session = new Session();
