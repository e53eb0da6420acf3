// The one request function of the dashboard. Every route of docs/api.md
// goes through it, from the per-resource files beside it (one per
// resource, as riverui's src/services: the wire type, its checker, the
// fetchers). Every request has a timeout (seed row 7: a hung fetch froze
// the old screen) and takes an AbortSignal so a page that goes away
// cancels its loads; every answer is checked against its wire type where
// it arrives, never cast.
//
// Auth (issue 11): every state-changing request (anything but GET) is sent
// as `Content-Type: application/json` with a JSON body — `{}` when the
// command takes no parameters, because the server refuses a state change
// without that type (a cross-origin form cannot send it) — and with the
// session's CSRF token in `X-CSRF-Token`. The token is kept here and only
// here: auth/session.ts sets it from every sign-in, /api/auth/me answer and
// password change, and clears it on sign-out (issue 26: a second copy
// went stale). A 401 answer means the session is gone: the registered
// handler shows the sign-in page. A 403 is an ApiError whose `permission`
// names what the role lacks.
import * as v from "valibot";
import { MalformedAnswer, type Decode } from "./wire";

/** The default request timeout. */
export const REQUEST_TIMEOUT_MS = 10_000;

/** ApiError is a failed request: an HTTP error answer, or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
    /** reason and args: why, as a code the dashboard's dictionaries say in words (docs/api.md "Errors"). */
    readonly reason?: string,
    readonly args: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** notFound is the only answer that proves absence. */
  get notFound(): boolean {
    return this.status === 404;
  }

  /** permission is the permission a 403 names as missing (details.permission, or .required), if any. */
  get permission(): string | undefined {
    if (this.status !== 403) return undefined;
    const p = this.details.permission ?? this.details.required ?? this.details.missing;
    return typeof p === "string" && p !== "" ? p : undefined;
  }
}

/**
 * ErrorBody is every error answer: {"error":{"code","message","details"?,
 * "reason"?,"args"?}}. Only the code must be there: a part of another
 * shape is read as absent, so a refusal is never mistaken for no answer.
 */
export const ErrorBody = v.object({
  error: v.object({
    code: v.string(),
    message: v.fallback(v.string(), ""),
    details: v.fallback(v.record(v.string(), v.unknown()), {}),
    reason: v.fallback(v.optional(v.string()), undefined),
    args: v.fallback(v.record(v.string(), v.string()), {}),
  }),
});

// The session's CSRF token (from /api/auth/me or the login answer); it is
// not a cookie the page could read, so the client keeps it here.
let csrf = "";

export function setCsrf(token: string): void {
  csrf = token;
}

export function getCsrf(): string {
  return csrf;
}

type Handler = () => void;
let unauthorized: Handler | undefined;

type Refresh = () => Promise<boolean>;
let refreshCsrf: Refresh | undefined;

/**
 * onCsrfRefused registers how to get a fresh CSRF token when a state
 * change is refused for a stale one (403, details.reason "csrf": e.g. the
 * session was rotated by a sign-in in another tab). It resolves true when
 * the token changed; the refused command is then sent once more — the
 * server refused it before doing anything, so sending it again is safe.
 */
export function onCsrfRefused(h: Refresh | undefined): void {
  refreshCsrf = h;
}

/**
 * onUnauthorized registers what a 401 does (the session module shows the
 * sign-in page). Requests made with `auth: false` (login, me) do not call it.
 */
export function onUnauthorized(h: Handler | undefined): void {
  unauthorized = h;
}

export type Method = "GET" | "POST" | "PUT" | "DELETE";

export interface RequestOptions {
  method?: Method;
  body?: unknown;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** auth: false for the session's own routes: a 401 there is an answer, not an expired session. */
  auth?: boolean;
  /** retried: this is the one resend after a CSRF refresh. */
  retried?: boolean;
}

/** isStateChange: every method but GET changes state and carries JSON and the CSRF token. */
export function isStateChange(method: Method): boolean {
  return method !== "GET";
}

/** nothing is the checker of an answer whose body the caller does not read. */
export const nothing: Decode<void> = () => undefined;

/**
 * request sends one request and checks its answer with decode; a body that
 * is not what the route promises is an ApiError "malformed" (with the path
 * of the first wrong field), never a value of the wrong type.
 */
export async function request<T>(path: string, decode: Decode<T>, opts: RequestOptions = {}): Promise<T> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new DOMException("timeout", "TimeoutError")), opts.timeoutMs ?? REQUEST_TIMEOUT_MS);
  const onAbort = (): void => ctl.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onAbort);
  const method = opts.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  let body: string | undefined;
  if (isStateChange(method)) {
    headers["Content-Type"] = "application/json";
    if (csrf) headers["X-CSRF-Token"] = csrf;
    body = JSON.stringify(opts.body ?? {});
  }
  try {
    let res: Response;
    try {
      res = await fetch(path, { method, headers, body, credentials: "same-origin", signal: ctl.signal });
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      const timedOut = ctl.signal.aborted;
      throw new ApiError(0, timedOut ? "timeout" : "network", timedOut ? "request timed out" : String(e));
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    let json = true;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        json = false;
      }
    }
    if (!res.ok) {
      if (res.status === 401 && opts.auth !== false) unauthorized?.();
      const err = v.safeParse(ErrorBody, parsed);
      const details: Record<string, unknown> = err.success ? { ...err.output.error.details } : {};
      const retryAfter = res.headers.get("Retry-After");
      if (retryAfter !== null && details.retry_after === undefined) details.retry_after = retryAfter;
      if (res.status === 403 && details.reason === "csrf" && isStateChange(method) && !opts.retried && refreshCsrf) {
        const sent = csrf;
        if ((await refreshCsrf()) && csrf !== sent) return request(path, decode, { ...opts, retried: true });
      }
      if (err.success) {
        const e = err.output.error;
        throw new ApiError(res.status, e.code, e.message, details, e.reason, e.args);
      }
      throw new ApiError(res.status, "http_" + res.status, text.slice(0, 200) || res.statusText, details);
    }
    if (!json) throw new ApiError(res.status, "malformed", `${method} ${path}: the answer is not JSON`);
    try {
      return decode(parsed);
    } catch (e) {
      if (e instanceof MalformedAnswer) throw new ApiError(res.status, "malformed", `${method} ${path}: ${e.message}`);
      throw e;
    }
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
  }
}

export const enc = encodeURIComponent;

/** query builds a query string from the set, non-empty params ("" when none). */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, val] of Object.entries(params)) if (val !== undefined && val !== "") q.set(k, String(val));
  const s = q.toString();
  return s ? "?" + s : "";
}
