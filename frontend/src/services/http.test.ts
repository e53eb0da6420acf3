import { beforeEach, describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../test/fakes";
import { adminService } from "./admin";
import { authService } from "./auth";
import { ApiError, onUnauthorized, setCsrf } from "./http";
import { jobsService } from "./jobs";
import { slotsService } from "./slots";

interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  credentials: RequestCredentials | undefined;
}

let sent: Sent[];
let answer: () => Response;
const accepted = { job_id: "j1", kind: "reset", slot: "s1", not_before: "2026-01-01T00:00:00Z", steps: ["delete_db"] };

beforeEach(() => {
  sent = [];
  answer = () => jsonResponse(accepted, 202);
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      sent.push({
        url,
        method: init?.method ?? "GET",
        headers: { ...(init?.headers as Record<string, string>) },
        body: typeof init?.body === "string" ? init.body : undefined,
        credentials: init?.credentials,
      });
      return answer();
    }),
  );
  setCsrf("csrf-123");
});

describe("the request function", () => {
  it.each([
    ["release", () => slotsService.release("s1")],
    ["teardown", () => slotsService.teardown("s1")],
    ["cancel", () => jobsService.cancel("j1")],
    ["resume", () => jobsService.resume("j1")],
    ["revoke (DELETE)", () => adminService.revokeToken("t1")],
    ["logout", () => authService.logout()],
  ])("%s without parameters still sends JSON {} and the CSRF token", async (_, call) => {
    await call();
    expect(sent).toHaveLength(1);
    expect(sent[0].headers["Content-Type"]).toBe("application/json");
    expect(sent[0].headers["X-CSRF-Token"]).toBe("csrf-123");
    expect(sent[0].body).toBe("{}");
    expect(sent[0].credentials).toBe("same-origin");
  });

  it("sends a command's parameters as JSON with the token", async () => {
    await slotsService.release("s1", "left the company");
    await adminService.setRole("u 1", "operator");
    expect(sent[0]).toMatchObject({ method: "POST", url: "/api/slots/s1/release", body: '{"reason":"left the company"}' });
    expect(sent[1]).toMatchObject({ method: "PUT", url: "/api/admin/users/u%201/role", body: '{"role":"operator"}' });
    for (const s of sent) expect(s.headers["X-CSRF-Token"]).toBe("csrf-123");
  });

  it("sends no body, content type or token with a read, and no actor header at all", async () => {
    answer = () => jsonResponse({ slots: [], position: 0 });
    await slotsService.list();
    expect(sent[0].method).toBe("GET");
    expect(sent[0].body).toBeUndefined();
    expect(sent[0].headers["Content-Type"]).toBeUndefined();
    expect(sent[0].headers["X-CSRF-Token"]).toBeUndefined();
    expect(Object.keys(sent[0].headers).some((h) => /actor/i.test(h))).toBe(false);
  });

  it("a 401 calls the session handler; a 401 on the session's own routes does not", async () => {
    const handler = vi.fn();
    onUnauthorized(handler);
    answer = () => jsonResponse({ error: { code: "unauthenticated", message: "sign in" } }, 401);
    await expect(slotsService.list()).rejects.toMatchObject({ status: 401 });
    expect(handler).toHaveBeenCalledTimes(1);
    await expect(authService.me()).rejects.toMatchObject({ status: 401 });
    await expect(authService.login("a", "b")).rejects.toMatchObject({ status: 401 });
    expect(handler).toHaveBeenCalledTimes(1);
  });

  it("a 403 names the missing permission", async () => {
    answer = () =>
      jsonResponse({ error: { code: "forbidden", message: "role member lacks slot.teardown", details: { permission: "slot.teardown" } } }, 403);
    const e = await slotsService.teardown("s1").catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).permission).toBe("slot.teardown");
  });

  it("a 429 keeps Retry-After", async () => {
    answer = () =>
      new Response(JSON.stringify({ error: { code: "too_many", message: "slow down" } }), {
        status: 429,
        headers: { "Content-Type": "application/json", "Retry-After": "7" },
      });
    const e = (await authService.login("a", "b").catch((x: unknown) => x)) as ApiError;
    expect(e.status).toBe(429);
    expect(e.details.retry_after).toBe("7");
  });

  it("reads admin lists bare or wrapped", async () => {
    answer = () => jsonResponse({ users: [{ id: "1", name: "a", role: "admin" }] });
    expect(await adminService.users()).toEqual([{ id: "1", name: "a", role: "admin" }]);
    answer = () => jsonResponse([{ id: "t", name: "ci", role: "viewer" }]);
    expect(await adminService.tokens()).toEqual([{ id: "t", name: "ci", role: "viewer" }]);
  });

  it("reads an answer that is not of its type as a clear error, not as a value", async () => {
    answer = () => jsonResponse({ slots: [{ name: "s1", lifecycle: 3 }], position: 1 });
    const e = (await slotsService.list().catch((x: unknown) => x)) as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect(e.code).toBe("malformed");
    expect(e.message).toMatch(/^GET \/api\/slots: malformed slot list at slots\.0\.lifecycle: /);
    answer = () => new Response("<html>proxy error</html>", { status: 200 });
    await expect(slotsService.list()).rejects.toMatchObject({ code: "malformed" });
    answer = () => jsonResponse({ users: "none" });
    await expect(adminService.users()).rejects.toMatchObject({ code: "malformed" });
  });

  it("keeps an error's reason code and its arguments (docs/api.md \"Errors\")", async () => {
    answer = () =>
      jsonResponse({ error: { code: "conflict", message: "slot s1 is locked", reason: "slot_locked", args: { slot: "s1" }, details: { blocking_job: "j9" } } }, 409);
    const e = (await slotsService.teardown("s1").catch((x: unknown) => x)) as ApiError;
    expect(e).toMatchObject({ status: 409, code: "conflict", reason: "slot_locked", args: { slot: "s1" } });
    expect(e.details.blocking_job).toBe("j9");
    // Only the code must be there: odd parts read as absent, the refusal stays a refusal.
    answer = () => jsonResponse({ error: { code: "conflict", details: null, args: { n: 1 } } }, 409);
    await expect(slotsService.teardown("s1")).rejects.toMatchObject({ status: 409, code: "conflict", message: "", args: {}, details: {} });
  });
});
