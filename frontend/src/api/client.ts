// The REST client: one function per route of docs/api.md. Every request has
// a timeout (seed row 7: a hung fetch froze the old screen) and takes an
// AbortSignal so a page that goes away cancels its loads.
//
// Auth (issue 11): every state-changing request (anything but GET) is sent
// as `Content-Type: application/json` with a JSON body — `{}` when the
// command takes no parameters, because the server refuses a state change
// without that type (a cross-origin form cannot send it) — and with the
// session's CSRF token in `X-CSRF-Token`. A 401 answer means the session is
// gone: the registered handler shows the sign-in page. A 403 is an
// ApiError whose `permission` names what the role lacks.
import type {
  AuditEntry,
  ErrorBody,
  JobAcceptedResult,
  JobView,
  Page,
  Plan,
  RecordedEvent,
  RemainingResource,
  SlotView,
} from "./types";
import type { CreatedToken, CreatedUser, LoginAnswer, MeAnswer, Occupant, TokenView, UserView } from "./authTypes";
import type { AdoptPlan, AdoptTarget, ReconcileReport } from "./reconcileTypes";

/** The default request timeout. */
export const REQUEST_TIMEOUT_MS = 10_000;

/** ApiError is a failed request: an HTTP error answer, or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
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

function isErrorBody(v: unknown): v is ErrorBody {
  return typeof v === "object" && v !== null && "error" in v && typeof (v as ErrorBody).error === "object";
}

export async function request<T>(path: string, opts: RequestOptions = {}): Promise<T> {
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
      res = await fetch(path, {
        method,
        headers,
        body,
        credentials: "same-origin",
        signal: ctl.signal,
      });
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      const timedOut = ctl.signal.aborted;
      throw new ApiError(0, timedOut ? "timeout" : "network", timedOut ? "request timed out" : String(e));
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    if (!res.ok) {
      if (res.status === 401 && opts.auth !== false) unauthorized?.();
      const details: Record<string, unknown> = isErrorBody(parsed) ? (parsed.error.details ?? {}) : {};
      const retryAfter = res.headers.get("Retry-After");
      if (retryAfter !== null && details.retry_after === undefined) details.retry_after = retryAfter;
      if (res.status === 403 && details.reason === "csrf" && isStateChange(method) && !opts.retried && refreshCsrf) {
        const sent = csrf;
        if ((await refreshCsrf()) && csrf !== sent) return request<T>(path, { ...opts, retried: true });
      }
      if (isErrorBody(parsed)) {
        throw new ApiError(res.status, parsed.error.code, parsed.error.message, details);
      }
      throw new ApiError(res.status, "http_" + res.status, text.slice(0, 200) || res.statusText, details);
    }
    return parsed as T;
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
  }
}

const enc = encodeURIComponent;

/** JobsFilter is GET /api/jobs's filter; empty fields match everything. */
export interface JobsFilter {
  state?: string;
  kind?: string;
  slot?: string;
  actor?: string;
}

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? "?" + s : "";
}

export const api = {
  slots: (signal?: AbortSignal) => request<{ slots: SlotView[] | null; position: number }>("/api/slots", { signal }),
  slot: (name: string, signal?: AbortSignal) => request<SlotView>(`/api/slots/${enc(name)}`, { signal }),
  register: (body: unknown) => request<SlotView>("/api/slots", { method: "POST", body }),
  /** occupy: byId names someone else (a subject id from occupants()); omitted: the caller. */
  occupy: (name: string, until: string, byId?: string) =>
    request<SlotView>(`/api/slots/${enc(name)}/occupy`, { method: "POST", body: byId ? { by_id: byId, until } : { until } }),
  /** occupants: whom a slot can be occupied for (operator and above). */
  occupants: async (signal?: AbortSignal): Promise<Occupant[]> =>
    listOf<Occupant>(await request<unknown>("/api/occupants", { signal }), "occupants"),
  extend: (name: string, until: string) =>
    request<SlotView>(`/api/slots/${enc(name)}/extend`, { method: "POST", body: { until } }),
  /** setEarlierDeadline: the explicit, confirmed way to shorten an occupancy (extend only adds). */
  setEarlierDeadline: (name: string, deadline: string) =>
    request<SlotView>(`/api/slots/${enc(name)}/deadline`, { method: "POST", body: { deadline, confirm_earlier: true } }),
  /** release: an operator releasing someone else's slot must give a reason (the server records it). */
  release: (name: string, reason?: string) =>
    request<JobAcceptedResult>(`/api/slots/${enc(name)}/release`, { method: "POST", body: reason ? { reason } : {} }),
  teardown: (name: string) => request<JobAcceptedResult>(`/api/slots/${enc(name)}/teardown`, { method: "POST" }),
  promote: (name: string, project: string, repoName: string) =>
    request<JobAcceptedResult>(`/api/slots/${enc(name)}/promote`, {
      method: "POST",
      body: { project, name: repoName },
    }),
  plan: (name: string, kind: string, params: { project?: string; name?: string } = {}, signal?: AbortSignal) =>
    request<Plan>(`/api/slots/${enc(name)}/plan${query({ kind, ...params })}`, { signal }),
  slotJobs: (name: string, kind?: string, cursor?: string, signal?: AbortSignal) =>
    request<Page>(`/api/slots/${enc(name)}/jobs${query({ kind, cursor, limit: 20 })}`, { signal }),
  latestJob: (name: string, kind: string, signal?: AbortSignal) =>
    request<JobView>(`/api/slots/${enc(name)}/jobs/latest${query({ kind })}`, { signal }),
  /** jobs: every job across slots, newest first (GET /api/jobs); state may also be "uncertain". */
  jobs: (f: JobsFilter, cursor?: string, signal?: AbortSignal) =>
    request<Page>(`/api/jobs${query({ ...f, cursor, limit: 20 })}`, { signal }),
  job: (id: string, signal?: AbortSignal) => request<JobView>(`/api/jobs/${enc(id)}`, { signal }),
  /** jobEvents: the job's raw events; with after, only those of a later revision. */
  jobEvents: (id: string, signal?: AbortSignal, after?: number) =>
    request<{ events: RecordedEvent[] | null }>(`/api/jobs/${enc(id)}/events${query({ after })}`, { signal }),
  cancel: (id: string) => request<{ job_id: string }>(`/api/jobs/${enc(id)}/cancel`, { method: "POST" }),
  resume: (id: string) => request<JobAcceptedResult>(`/api/jobs/${enc(id)}/resume`, { method: "POST" }),
  audit: (
    f: {
      slot?: string;
      job?: string;
      actor?: string;
      kind?: string;
      since?: string;
      after?: number;
      /** before and order "newest": newest first, paged backwards. */
      before?: number;
      order?: "newest" | "oldest";
      limit?: number;
    },
    signal?: AbortSignal,
  ) => request<{ entries: AuditEntry[] | null }>(`/api/audit${query(f)}`, { signal }),
  remaining: (signal?: AbortSignal) =>
    request<{ resources: RemainingResource[] | null }>("/api/resources/remaining", { signal }),

  // Reconciliation (issue 15).
  reconcile: (signal?: AbortSignal) => request<ReconcileReport>("/api/reconcile", { signal }),
  reconcileRun: () => request<{ status: string }>("/api/reconcile/run", { method: "POST" }),
  planAdopt: (slot: string, target: AdoptTarget, signal?: AbortSignal) =>
    request<AdoptPlan>(`/api/reconcile/adopt/plan${query({ slot, ...target })}`, { signal }),
  adopt: (slot: string, target: AdoptTarget) =>
    request<JobAcceptedResult>("/api/reconcile/adopt", { method: "POST", body: { slot, ...target } }),
  planDeleteOrphan: (slot: string, target: AdoptTarget, signal?: AbortSignal) =>
    request<AdoptPlan>(`/api/reconcile/delete/plan${query({ slot, ...target })}`, { signal }),
  deleteOrphan: (slot: string, target: AdoptTarget) =>
    request<JobAcceptedResult>("/api/reconcile/delete", { method: "POST", body: { slot, ...target } }),

  // The session (auth: false — a 401 here is the answer, not an expiry).
  me: (signal?: AbortSignal) => request<MeAnswer>("/api/auth/me", { signal, auth: false }),
  login: (name: string, password: string) =>
    request<LoginAnswer>("/api/auth/login", { method: "POST", body: { name, password }, auth: false }),
  /** demoLogin: the loopback demo's "Continue as demo-admin". */
  demoLogin: () => request<LoginAnswer>("/api/auth/demo", { method: "POST", auth: false }),
  logout: () => request<void>("/api/auth/logout", { method: "POST", auth: false }),
  /** changePassword: the answer carries the rotated session's CSRF token (every old session ended). */
  changePassword: (current: string, next: string) =>
    request<LoginAnswer>("/api/auth/password", { method: "POST", body: { current, new: next } }),

  // Administration (admin role).
  users: async (signal?: AbortSignal): Promise<UserView[]> =>
    listOf<UserView>(await request<unknown>("/api/admin/users", { signal }), "users"),
  createUser: (body: { name: string; role: string; password?: string }) =>
    request<CreatedUser>("/api/admin/users", { method: "POST", body }),
  setRole: (id: string, role: string) =>
    request<unknown>(`/api/admin/users/${enc(id)}/role`, { method: "PUT", body: { role } }),
  tokens: async (signal?: AbortSignal): Promise<TokenView[]> =>
    listOf<TokenView>(await request<unknown>("/api/admin/tokens", { signal }), "tokens"),
  createToken: (body: { name: string; role: string; expires: string }) =>
    request<CreatedToken>("/api/admin/tokens", { method: "POST", body }),
  revokeToken: (id: string) => request<unknown>(`/api/admin/tokens/${enc(id)}`, { method: "DELETE" }),
};

/** listOf reads a list answer: a bare array, or an object holding it under key. */
function listOf<T>(v: unknown, key: string): T[] {
  if (Array.isArray(v)) return v as T[];
  if (typeof v === "object" && v !== null) {
    const inner = (v as Record<string, unknown>)[key];
    if (Array.isArray(inner)) return inner as T[];
  }
  return [];
}
