// The signed-in subject of this tab. GET /api/auth/me tells who it is (and
// the CSRF token every command must carry); a 401 from any request means
// the session is gone, and the app shows the sign-in page instead of the
// routes (the hash route is kept, so signing in returns to the same page).
import { useSyncExternalStore } from "react";
import { authService, type LoginAnswer } from "../services/auth";
import { ApiError, onCsrfRefused, onUnauthorized, setCsrf } from "../services/http";
import { observable } from "../live/observable";
import { setJobLimits, setProviderLinks } from "./links";
import type { Subject } from "./roles";

export type AuthState =
  | { status: "checking" }
  /** unreachable: the first check got no answer (network, 5xx); retry offers itself. */
  | { status: "unreachable"; error: ApiError }
  /** expired: the tab was signed in and a request answered 401. */
  | { status: "signed_out"; methods: string[]; expired: boolean }
  /** passwordChange: the account has a password its owner knows (the account page offers a change). */
  | { status: "signed_in"; subject: Subject; methods: string[]; passwordChange?: boolean };

const DEFAULT_METHODS = ["local"];

const state = observable<AuthState>({ status: "checking" });

export function getAuth(): AuthState {
  return state.get();
}

export function subscribeAuth(listener: () => void): () => void {
  return state.subscribe(listener);
}

export function useAuth(): AuthState {
  return useSyncExternalStore(state.subscribe, state.get, state.get);
}

/** useSubject is the signed-in subject, or undefined. */
export function useSubject(): Subject | undefined {
  const s = useAuth();
  return s.status === "signed_in" ? s.subject : undefined;
}

function knownMethods(): string[] {
  const s = state.get();
  return s.status === "signed_in" || s.status === "signed_out" ? s.methods : DEFAULT_METHODS;
}

/** methodsOf reads the sign-in methods from a 401 answer's details, if the server names them. */
function methodsOf(e: ApiError): string[] {
  const m = e.details.methods;
  return Array.isArray(m) && m.every((x) => typeof x === "string") && m.length > 0 ? (m as string[]) : knownMethods();
}

function signedOut(methods: string[], expired: boolean): void {
  setCsrf("");
  state.set({ status: "signed_out", methods, expired });
}

/**
 * DEMO_KEY marks that this browser has used the loopback demo's sign-in
 * (or signed out of it). The demo signs a browser in by itself only on its
 * first visit; after that, and always after "Sign out", it takes the
 * sign-in page's "Continue as demo-admin" (a read never signs in: issue 25).
 */
export const DEMO_KEY = "slotkeeper.demo-used";

function demoUsed(): boolean {
  try {
    return localStorage.getItem(DEMO_KEY) !== null;
  } catch {
    return true; // no storage: never sign in without a click
  }
}

function markDemoUsed(): void {
  try {
    localStorage.setItem(DEMO_KEY, "1");
  } catch {
    // private mode without storage: the button still works
  }
}

function adopt(ans: LoginAnswer, methods: string[]): Subject {
  setCsrf(ans.csrf ?? "");
  setProviderLinks(ans.links);
  setJobLimits(ans.limits);
  state.set({ status: "signed_in", subject: ans.subject, methods, passwordChange: ans.password_change === true });
  return ans.subject;
}

/**
 * checkSession asks the server who this tab is. initial: the first check at
 * start (an unreachable server shows an error with retry; in the loopback
 * demo, a browser's very first visit signs in as demo-admin by itself). A
 * later check (the stream was refused) changes nothing unless the answer
 * is a definite 401, so a passing network fault never signs anyone out.
 */
export async function checkSession(initial = false): Promise<void> {
  const wasIn = state.get().status === "signed_in";
  try {
    const me = await authService.me();
    if (me.signed_in === false) await nobody(me.methods, initial, wasIn);
    else adopt(me, me.methods ?? DEFAULT_METHODS);
  } catch (e) {
    const err = e instanceof ApiError ? e : new ApiError(0, "network", String(e));
    // A 401: a session cookie that ended (an older server also answers a
    // request without one so).
    if (err.status === 401) await nobody(methodsOf(err), initial, wasIn);
    else if (initial || state.get().status === "checking") state.set({ status: "unreachable", error: err });
  }
}

/** nobody is a "not signed in" answer: the demo's first visit signs in by itself, else the sign-in page. */
async function nobody(methods: string[], initial: boolean, wasIn: boolean): Promise<void> {
  if (initial && methods.includes("demo") && !demoUsed()) {
    try {
      await demoSignIn(methods);
      return;
    } catch {
      // fall through to the sign-in page, which offers the button
    }
  }
  signedOut(methods, wasIn);
}

/** demoSignIn is the loopback demo's "Continue as demo-admin"; it throws the ApiError on refusal. */
export async function demoSignIn(methods: string[] = knownMethods()): Promise<Subject> {
  const ans = await authService.demoLogin();
  markDemoUsed();
  return adopt(ans, methods);
}

/** signIn posts the credentials; on success the tab is signed in. It throws the ApiError otherwise. */
export async function signIn(name: string, password: string): Promise<Subject> {
  return adopt(await authService.login(name, password), knownMethods());
}

/** changePassword changes the signed-in account's password and adopts the rotated session's token. */
export async function changePassword(current: string, next: string): Promise<void> {
  const ans = await authService.changePassword(current, next);
  setCsrf(ans.csrf ?? "");
  const s = state.get();
  if (s.status === "signed_in") state.set({ ...s, subject: ans.subject ?? s.subject, passwordChange: ans.password_change ?? s.passwordChange });
}

/** signOut ends the session on the server; the tab is signed out even if the server cannot be told. */
export async function signOut(): Promise<void> {
  const s = state.get();
  // After an explicit sign-out a reload shows the sign-in page (with
  // "Continue as demo-admin" in the demo), never a silent sign-in.
  if (s.status === "signed_in" && s.methods.includes("demo")) markDemoUsed();
  try {
    await authService.logout();
  } finally {
    signedOut(knownMethods(), false);
  }
}

/** sessionExpired is what a 401 from any request does. */
export function sessionExpired(): void {
  if (state.get().status === "signed_in") signedOut(knownMethods(), true);
}

/** installAuth wires the client's 401 handler; main.tsx calls it once. */
export function installAuth(): void {
  onUnauthorized(sessionExpired);
  onCsrfRefused(async () => {
    await checkSession();
    return state.get().status === "signed_in";
  });
}

/** resetAuth is for tests: back to "checking", no token, no handler. */
export function resetAuth(next: AuthState = { status: "checking" }): void {
  setCsrf("");
  onUnauthorized(undefined);
  onCsrfRefused(undefined);
  state.set(next);
}

/** setAuthForTest signs a subject in without a server (component tests). */
export function setAuthForTest(subject: Subject | undefined, csrf = "tok"): void {
  if (subject) {
    setCsrf(csrf);
    state.set({ status: "signed_in", subject, methods: DEFAULT_METHODS, passwordChange: subject.id.startsWith("user:") });
  } else signedOut(DEFAULT_METHODS, false);
}
