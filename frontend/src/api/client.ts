// The REST client: one function per route of docs/api.md. Every request has
// a timeout (seed row 7: a hung fetch froze the old screen) and takes an
// AbortSignal so a page that goes away cancels its loads.
import { encodeActor, getActor } from "../live/actor";
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
}

export interface RequestOptions {
  method?: "GET" | "POST";
  body?: unknown;
  signal?: AbortSignal;
  timeoutMs?: number;
}

function isErrorBody(v: unknown): v is ErrorBody {
  return typeof v === "object" && v !== null && "error" in v && typeof (v as ErrorBody).error === "object";
}

export async function request<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new DOMException("timeout", "TimeoutError")), opts.timeoutMs ?? REQUEST_TIMEOUT_MS);
  const onAbort = (): void => ctl.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onAbort);
  const headers: Record<string, string> = { Accept: "application/json" };
  const actor = getActor();
  if (actor) headers["X-Slotkeeper-Actor"] = encodeActor(actor);
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  try {
    let res: Response;
    try {
      res = await fetch(path, {
        method: opts.method ?? "GET",
        headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: ctl.signal,
      });
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      const timedOut = ctl.signal.aborted;
      throw new ApiError(0, timedOut ? "timeout" : "network", timedOut ? "request timed out" : String(e));
    }
    const text = await res.text();
    let body: unknown = undefined;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
    }
    if (!res.ok) {
      if (isErrorBody(body)) {
        throw new ApiError(res.status, body.error.code, body.error.message, body.error.details ?? {});
      }
      throw new ApiError(res.status, "http_" + res.status, text.slice(0, 200) || res.statusText);
    }
    return body as T;
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
  }
}

const enc = encodeURIComponent;

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
  occupy: (name: string, until: string, by?: string) =>
    request<SlotView>(`/api/slots/${enc(name)}/occupy`, { method: "POST", body: by ? { by, until } : { until } }),
  extend: (name: string, until: string) =>
    request<SlotView>(`/api/slots/${enc(name)}/extend`, { method: "POST", body: { until } }),
  release: (name: string) => request<JobAcceptedResult>(`/api/slots/${enc(name)}/release`, { method: "POST" }),
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
  job: (id: string, signal?: AbortSignal) => request<JobView>(`/api/jobs/${enc(id)}`, { signal }),
  jobEvents: (id: string, signal?: AbortSignal) =>
    request<{ events: RecordedEvent[] | null }>(`/api/jobs/${enc(id)}/events`, { signal }),
  cancel: (id: string) => request<{ job_id: string }>(`/api/jobs/${enc(id)}/cancel`, { method: "POST" }),
  resume: (id: string) => request<JobAcceptedResult>(`/api/jobs/${enc(id)}/resume`, { method: "POST" }),
  audit: (
    f: { slot?: string; job?: string; actor?: string; kind?: string; since?: string; after?: number; limit?: number },
    signal?: AbortSignal,
  ) => request<{ entries: AuditEntry[] | null }>(`/api/audit${query(f)}`, { signal }),
  remaining: (signal?: AbortSignal) =>
    request<{ resources: RemainingResource[] | null }>("/api/resources/remaining", { signal }),
};
