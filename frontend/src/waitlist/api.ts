// The waitlist's REST calls (docs/api.md "Waitlist"). Kept apart from
// api/client.ts: commands send the session's CSRF token, learned once from
// GET /api/auth/me (a cookie session needs it on every state change).
import { ApiError, REQUEST_TIMEOUT_MS } from "../api/client";

export interface Estimate {
  /** null: unknown (no data to estimate from). */
  seconds: number | null;
  at?: string;
  /** How the estimate was computed, or why it is unknown. */
  basis: string;
}

export interface WaitlistOffer {
  id: string;
  slot: string;
  expires_at: string;
}

export interface WaitlistEntry {
  id: string;
  who: string;
  who_id?: string;
  position: number;
  duration: string;
  note?: string;
  prefix?: string;
  joined_at: string;
  estimated_wait: Estimate;
  offer?: WaitlistOffer;
}

export interface DeadlineWarning {
  slot: string;
  occupant: string;
  deadline: string;
  lead_s: number;
}

export interface WaitlistAnswer {
  entries: WaitlistEntry[] | null;
  position: number;
  server_time: string;
  offer_ttl: string;
  warnings: DeadlineWarning[] | null;
}

export interface Me {
  subject: { id: string; name: string; role: string };
  csrf: string;
}

let me: Promise<Me | undefined> | undefined;

/** whoAmI is the signed-in subject (undefined when not signed in), asked once. */
export function whoAmI(): Promise<Me | undefined> {
  me ??= call<Me | { signed_in: false }>("GET", "/api/auth/me").then(
    (m) => {
      if (m && "subject" in m) return m;
      me = undefined; // not signed in (a 200 since issue 27): ask again next time
      return undefined;
    },
    () => {
      me = undefined; // ask again next time
      return undefined;
    },
  );
  return me;
}

/** forgetMe drops the cached subject (tests; sign-out). */
export function forgetMe(): void {
  me = undefined;
}

async function call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS);
  const onAbort = (): void => ctl.abort();
  signal?.addEventListener("abort", onAbort);
  const headers: Record<string, string> = { Accept: "application/json" };
  // Every state change is JSON (the server answers 415 without the type).
  if (method !== "GET") body ??= {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  // Ask who we are first, for every call but that one: it is what signs a
  // loopback browser in (the demo), and state changes need its CSRF token.
  if (path !== "/api/auth/me") {
    const m = await whoAmI();
    if (method !== "GET" && m?.csrf) headers["X-CSRF-Token"] = m.csrf;
  }
  try {
    let res: Response;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: ctl.signal, credentials: "same-origin" });
    } catch (e) {
      if (signal?.aborted) throw e;
      throw new ApiError(0, ctl.signal.aborted ? "timeout" : "network", String(e));
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) {
      const err = (parsed as { error?: { code: string; message: string; details?: Record<string, unknown> } } | undefined)?.error;
      if (err) throw new ApiError(res.status, err.code, err.message, err.details ?? {});
      throw new ApiError(res.status, "http_" + res.status, text.slice(0, 200) || res.statusText);
    }
    return parsed as T;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

const enc = encodeURIComponent;

export const waitlistApi = {
  list: (after: number, signal?: AbortSignal) =>
    call<WaitlistAnswer>("GET", `/api/waitlist${after > 0 ? `?after=${after}` : ""}`, undefined, signal),
  join: (duration: string, note: string) => call<WaitlistAnswer>("POST", "/api/waitlist", note ? { duration, note } : { duration }),
  leave: (id: string) => call<WaitlistAnswer>("DELETE", `/api/waitlist/${enc(id)}`),
  accept: (id: string) => call<WaitlistAnswer>("POST", `/api/waitlist/${enc(id)}/accept`),
  decline: (id: string) => call<WaitlistAnswer>("POST", `/api/waitlist/${enc(id)}/decline`),
  extend: (slot: string, until: string) => call<unknown>("POST", `/api/slots/${enc(slot)}/extend`, { until }),
};

/**
 * WAITLIST_TYPES are the event types after which the waitlist (or an
 * estimate, which follows deadlines and resets) may have changed; the page
 * reloads GET /api/waitlist?after=<their position> when the stream shows one.
 */
export const WAITLIST_TYPES = new Set([
  "WaitlistJoined",
  "WaitlistLeft",
  "WaitlistReordered",
  "OfferMade",
  "OfferAccepted",
  "OfferDeclined",
  "OfferExpired",
  "OfferWithdrawn",
  "SlotHeld",
  "SlotHoldReleased",
  "DeadlineWarning",
  "SlotOccupied",
  "OccupancyExtended",
  "JobAccepted",
  "JobReleased",
  "SlotVacated",
]);
