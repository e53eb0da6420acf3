import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { getCsrf } from "../services/http";
import { slotsService } from "../services/slots";
import { getStreamStatus, startStream } from "../live/stream";
import { FakeEventSource, fakeFactory, jsonResponse, slot } from "../test/fakes";
import { followSession } from "./liveSession";
import { DEMO_KEY, checkSession, demoSignIn, getAuth, installAuth, resetAuth, signIn, signOut } from "./session";

const ACCEPTED = { job_id: "j1", kind: "teardown", slot: "s1", not_before: "2026-01-01T00:00:00Z", steps: ["delete_app"] };
const ADA = { id: "u-1", name: "ada", role: "operator" };
const DEMO = { id: "user:d-1", name: "demo-admin", role: "admin" };
const demoOffered = () =>
  jsonResponse({ error: { code: "unauthenticated", message: "not signed in", details: { methods: ["local", "demo"] } } }, 401);
let me: () => Response;
let calls: { url: string; method: string; headers: Record<string, string> }[];
let unfollow: (() => void) | undefined;

const unauthorized = () => jsonResponse({ error: { code: "unauthenticated", message: "sign in" } }, 401);

beforeEach(() => {
  FakeEventSource.opened = [];
  calls = [];
  me = unauthorized;
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? "GET";
      calls.push({ url, method, headers: { ...(init?.headers as Record<string, string>) } });
      if (url === "/api/auth/me") return me();
      if (url === "/api/auth/login") {
        const body = JSON.parse(String(init?.body)) as { name: string; password: string };
        return body.password === "right" ? jsonResponse({ subject: ADA, csrf: "c-login" }) : unauthorized();
      }
      if (url === "/api/auth/logout") return new Response(null, { status: 204 });
      if (url === "/api/auth/demo" && method === "POST") return jsonResponse({ subject: DEMO, csrf: "c-demo" });
      return unauthorized();
    }),
  );
  resetAuth();
  installAuth();
});

afterEach(() => {
  unfollow?.();
  unfollow = undefined;
});

describe("session", () => {
  it("me → signed in with the CSRF token and the offered methods", async () => {
    me = () => jsonResponse({ subject: ADA, csrf: "c-me", methods: ["local", "oidc"] });
    await checkSession(true);
    expect(getAuth()).toEqual({ status: "signed_in", subject: ADA, methods: ["local", "oidc"], passwordChange: false });
    expect(getCsrf()).toBe("c-me");
  });

  it("me 401 → signed out (not expired); no answer → unreachable", async () => {
    await checkSession(true);
    expect(getAuth()).toMatchObject({ status: "signed_out", expired: false });
    resetAuth();
    me = () => {
      throw new TypeError("Failed to fetch");
    };
    await checkSession(true);
    expect(getAuth()).toMatchObject({ status: "unreachable" });
  });

  it("me 200 not-signed-in (no credential sent, issue 27) → signed out with the offered methods, like a 401", async () => {
    me = () => jsonResponse({ signed_in: false, methods: ["local", "oidc"] });
    await checkSession(true);
    expect(getAuth()).toEqual({ status: "signed_out", methods: ["local", "oidc"], expired: false });
    expect(getCsrf()).toBe("");
  });

  it("a later check that gets no answer keeps the tab signed in", async () => {
    me = () => jsonResponse({ subject: ADA, csrf: "c" });
    await checkSession(true);
    me = () => new Response("bad gateway", { status: 502 });
    await checkSession();
    expect(getAuth().status).toBe("signed_in");
  });

  it("sign in, a 401 elsewhere shows the sign-in page as expired, sign out clears the token", async () => {
    await expect(signIn("ada", "wrong")).rejects.toMatchObject({ status: 401 });
    await signIn("ada", "right");
    expect(getAuth()).toMatchObject({ status: "signed_in", subject: ADA });
    expect(getCsrf()).toBe("c-login");
    // Any request answering 401 (session expired on the server).
    await slotsService.list().catch(() => undefined);
    expect(getAuth()).toMatchObject({ status: "signed_out", expired: true });
    expect(getCsrf()).toBe("");
    await signIn("ada", "right");
    await signOut();
    const logout = calls.find((c) => c.url === "/api/auth/logout");
    expect(logout?.headers["X-CSRF-Token"]).toBe("c-login");
    expect(getAuth()).toMatchObject({ status: "signed_out", expired: false });
    expect(getCsrf()).toBe("");
  });
});

describe("the loopback demo's sign-in (issue 25)", () => {
  beforeEach(() => localStorage.removeItem(DEMO_KEY));

  it("a browser's first visit signs in once by POST; after sign-out a reload only offers the button", async () => {
    me = demoOffered;
    await checkSession(true);
    expect(getAuth()).toMatchObject({ status: "signed_in", subject: DEMO, passwordChange: false });
    expect(calls.filter((c) => c.url === "/api/auth/demo").map((c) => c.method)).toEqual(["POST"]);
    await signOut();
    calls = [];
    resetAuth();
    installAuth();
    await checkSession(true); // the reload
    expect(getAuth()).toMatchObject({ status: "signed_out", methods: ["local", "demo"] });
    expect(calls.some((c) => c.url === "/api/auth/demo")).toBe(false);
    await demoSignIn(["local", "demo"]);
    expect(getAuth()).toMatchObject({ status: "signed_in", subject: DEMO });
    expect(getCsrf()).toBe("c-demo");
  });

  it("the first visit's 200 not-signed-in answer offering the demo signs in by POST (issue 27: no 401 in the console)", async () => {
    me = () => jsonResponse({ signed_in: false, methods: ["local", "demo"] });
    await checkSession(true);
    expect(getAuth()).toMatchObject({ status: "signed_in", subject: DEMO });
    expect(calls.filter((c) => c.url === "/api/auth/demo").map((c) => c.method)).toEqual(["POST"]);
  });

  it("without the demo on offer nothing is posted", async () => {
    await checkSession(true);
    expect(getAuth()).toMatchObject({ status: "signed_out" });
    expect(calls.some((c) => c.url === "/api/auth/demo")).toBe(false);
  });
});

describe("the stream follows the session", () => {
  const follow = () => {
    unfollow = followSession((onRefused) => startStream({ heartbeatMs: 1000, create: fakeFactory, onRefused }));
  };

  it("opens only when signed in, closes on sign-out, and resumes after the next sign-in", async () => {
    follow();
    await checkSession(true);
    expect(FakeEventSource.opened).toHaveLength(0);
    await signIn("ada", "right");
    expect(FakeEventSource.opened).toHaveLength(1);
    const first = FakeEventSource.last();
    expect(first.url).toBe("/api/stream");
    first.open();
    first.emit("snapshot", { position: 7, server_time: new Date().toISOString(), slots: [slot()] }, "7");
    await signOut();
    expect(first.closed).toBe(true);
    expect(getStreamStatus()).toBe("stopped");
    await signIn("ada", "right");
    expect(FakeEventSource.opened).toHaveLength(2);
    expect(FakeEventSource.last().url).toBe("/api/stream?last_event_id=7");
  });

  it("a refused stream asks who is signed in; a 401 stops it and shows sign-in", async () => {
    follow();
    me = () => jsonResponse({ subject: ADA, csrf: "c" });
    await checkSession(true);
    const es = FakeEventSource.last();
    es.open();
    me = unauthorized;
    es.fail(true); // the browser gave up: the server answered non-200
    // A bound only a state that never comes reaches (the default 1 s is a
    // loaded machine's, issue 36 item 7).
    await vi.waitFor(() => expect(getAuth()).toMatchObject({ status: "signed_out", expired: true }), { timeout: 15_000 });
    expect(getStreamStatus()).toBe("stopped");
    expect(FakeEventSource.opened).toHaveLength(1);
  });
});

describe("a stale CSRF token", () => {
  it("is refreshed from /api/auth/me and the refused command sent once more", async () => {
    me = () => jsonResponse({ subject: ADA, csrf: "old" });
    await checkSession(true);
    me = () => jsonResponse({ subject: ADA, csrf: "new" });
    const sentTokens: string[] = [];
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string, init?: RequestInit) => {
        if (url === "/api/auth/me") return me();
        const tok = (init?.headers as Record<string, string>)["X-CSRF-Token"];
        sentTokens.push(tok);
        return tok === "new"
          ? jsonResponse(ACCEPTED, 202)
          : jsonResponse({ error: { code: "forbidden", message: "csrf", details: { reason: "csrf" } } }, 403);
      }),
    );
    await expect(slotsService.teardown("s1")).resolves.toEqual(ACCEPTED);
    expect(sentTokens).toEqual(["old", "new"]);
  });

  it("is not retried when the refresh brings no new token", async () => {
    me = () => jsonResponse({ subject: ADA, csrf: "same" });
    await checkSession(true);
    let posts = 0;
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string) => {
        if (url === "/api/auth/me") return me();
        posts++;
        return jsonResponse({ error: { code: "forbidden", message: "csrf", details: { reason: "csrf" } } }, 403);
      }),
    );
    await expect(slotsService.teardown("s1")).rejects.toMatchObject({ status: 403 });
    expect(posts).toBe(1);
  });
});
