// The session's own routes (docs/auth.md): who this tab is, sign-in,
// sign-out and a password change. They are sent with auth: false — a 401
// here is the answer, not an expired session.
import * as v from "valibot";
import { nothing, request } from "./http";
import { decoder, int, optStr, str } from "./wire";

export const Subject = v.object({ id: str, name: str, role: str });

/** ProviderLinks: the providers' web roots (signed in only), for links to resources. */
export const ProviderLinks = v.object({ coolify: optStr, bitbucket: optStr });

export const LoginAnswer = v.object({
  subject: Subject,
  csrf: str,
  /** Sign-in methods the server offers: "local", "oidc" when configured, "demo" in the loopback demo (me only). */
  methods: v.optional(v.array(str)),
  links: v.optional(ProviderLinks),
  /** The engine's timeouts (issue 35): the job page counts a running step down to its timeout. */
  limits: v.optional(v.object({ step_timeout_ms: v.optional(int), job_timeout_ms: v.optional(int) })),
  /** password_change: a local account with a known password (not a token, single sign-on or the demo's demo-admin). */
  password_change: v.optional(v.boolean()),
});
export type LoginAnswer = v.InferOutput<typeof LoginAnswer>;
/**
 * NotSignedIn is GET /api/auth/me's answer to a request with no credential
 * (a 200 on newer servers, so a first visit logs no console error; a
 * session cookie that ended is still a 401).
 */
export const NotSignedIn = v.object({ signed_in: v.literal(false), methods: v.array(str) });

/** MeAnswer is GET /api/auth/me's answer: who is signed in (the login answer and the methods), or nobody. */
const MeAnswer = v.union([NotSignedIn, v.object({ ...LoginAnswer.entries, signed_in: v.optional(v.literal(true)) })]);
export type MeAnswer = v.InferOutput<typeof MeAnswer>;

const answer = decoder(LoginAnswer, "session answer");
const meAnswer = decoder(MeAnswer, "session answer");

export const authService = {
  me: (signal?: AbortSignal) => request("/api/auth/me", meAnswer, { signal, auth: false }),
  login: (name: string, password: string) =>
    request("/api/auth/login", answer, { method: "POST", body: { name, password }, auth: false }),
  /** demoLogin: the loopback demo's "Continue as demo-admin". */
  demoLogin: () => request("/api/auth/demo", answer, { method: "POST", auth: false }),
  logout: () => request("/api/auth/logout", nothing, { method: "POST", auth: false }),
  /** changePassword: the answer carries the rotated session's CSRF token (every old session ended). */
  changePassword: (current: string, next: string) =>
    request("/api/auth/password", answer, { method: "POST", body: { current, new: next } }),
};
