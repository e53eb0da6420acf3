// Wire types of the auth and admin routes (issue 11).
import type { ProviderLinks } from "../auth/links";
import type { Subject } from "../auth/roles";

/**
 * MeAnswer is GET /api/auth/me: who is signed in, or (a request with no
 * credential) NotSignedIn, a 200 since issue 27 so a first visit logs no
 * console error. A session cookie that ended is still a 401.
 */
export type MeAnswer = SignedInAnswer | NotSignedIn;

export interface NotSignedIn {
  signed_in: false;
  methods: string[];
}

export interface SignedInAnswer {
  signed_in?: true;
  subject: Subject;
  csrf: string;
  /** Sign-in methods the server offers: "local", "oidc" when configured, "demo" in the loopback demo. */
  methods?: string[];
  /** links: the providers' web roots (signed in only), for links to resources. */
  links?: ProviderLinks;
  /** password_change: a local account with a known password (not a token, single sign-on or the demo's demo-admin). */
  password_change?: boolean;
}

export interface LoginAnswer {
  subject: Subject;
  csrf: string;
  links?: ProviderLinks;
  password_change?: boolean;
}

/** Occupant: someone a slot can be occupied for (GET /api/occupants). */
export interface Occupant {
  id: string;
  name: string;
  kind: "user" | "token";
}

export interface UserView {
  id: string;
  name: string;
  role: string;
  created_at?: string;
  created_by?: string;
  /** source: local | oidc */
  source?: string;
  disabled?: boolean;
}

/** CreatedUser: the new user; password only when the server generated one (shown once). */
export interface CreatedUser {
  id?: string;
  name?: string;
  role?: string;
  user?: UserView;
  password?: string;
}

export interface TokenView {
  id: string;
  name: string;
  role: string;
  created_at?: string;
  expires_at?: string;
  revoked?: boolean;
  revoked_at?: string;
  created_by?: string;
  /** state: the server's word (active | expired | revoked), preferred over the page's own reckoning. */
  state?: string;
}

/** CreatedToken: the secret is in this answer only. */
export interface CreatedToken {
  id: string;
  token: string;
  name?: string;
  role?: string;
  expires_at?: string;
}
