// Issue 26 item 4: the waitlist kept its own copy of the session (and its
// CSRF token), asked once and never cleared outside tests. After a password
// change (which rotates the session) or a sign-out and a sign-in as someone
// else without a reload, its commands carried the old token.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { changePassword, checkSession, installAuth, resetAuth, signIn, signOut } from "../auth/session";
import { jsonResponse } from "../test/fakes";
import { waitlistService } from "../services/waitlist";

const ADA = { id: "user:ada", name: "ada", role: "member" };
const BOB = { id: "user:bob", name: "bob", role: "member" };
const empty = { entries: [], position: 1, server_time: "2026-01-01T00:00:00Z", offer_ttl: "15m0s", warnings: [] };
let session: { subject: typeof ADA; csrf: string } | undefined;
let joins: (string | undefined)[];

beforeEach(() => {
  joins = [];
  session = { subject: ADA, csrf: "c-1" };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      const method = init.method ?? "GET";
      const csrf = (init.headers as Record<string, string> | undefined)?.["X-CSRF-Token"];
      const unauth = () => jsonResponse({ error: { code: "unauthenticated", message: "sign in" } }, 401);
      if (url === "/api/auth/me") return session ? jsonResponse(session) : unauth();
      if (url === "/api/auth/password") {
        session = { subject: ADA, csrf: "c-2" }; // every old session ended
        return jsonResponse(session);
      }
      if (url === "/api/auth/logout") {
        session = undefined;
        return new Response(null, { status: 204 });
      }
      if (url === "/api/auth/login") {
        session = { subject: BOB, csrf: "c-3" };
        return jsonResponse(session);
      }
      if (url === "/api/waitlist" && method === "POST") {
        joins.push(csrf);
        // The server's rule: a state change carries the session's token.
        if (!session || csrf !== session.csrf)
          return jsonResponse({ error: { code: "forbidden", message: "bad csrf token", details: { reason: "csrf" } } }, 403);
        return jsonResponse(empty, 201);
      }
      return jsonResponse({ error: { code: "not_found", message: "no" } }, 404);
    }),
  );
  resetAuth();
  installAuth();
});

describe("the waitlist's commands carry the session's current CSRF token", () => {
  it("after a password change", async () => {
    await checkSession(true);
    await waitlistService.join("1h", "");
    await changePassword("old-pw", "new-pw");
    await waitlistService.join("1h", "");
    expect(joins).toEqual(["c-1", "c-2"]);
  });

  it("after a sign-out and a sign-in as someone else, without a reload", async () => {
    await checkSession(true);
    await waitlistService.join("1h", "");
    await signOut();
    await signIn("bob", "pw");
    await waitlistService.join("1h", "");
    expect(joins).toEqual(["c-1", "c-3"]);
  });
});
