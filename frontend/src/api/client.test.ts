import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../test/fakes";
import { ApiError, api, onUnauthorized, setCsrf } from "./client";

interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  credentials: RequestCredentials | undefined;
}

let sent: Sent[];
let answer: () => Response;

beforeEach(() => {
  sent = [];
  answer = () => jsonResponse({ job_id: "j1" }, 202);
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

afterEach(() => {
  setCsrf("");
  onUnauthorized(undefined);
  vi.unstubAllGlobals();
});

describe("api client", () => {
  it.each([
    ["release", () => api.release("s1")],
    ["teardown", () => api.teardown("s1")],
    ["cancel", () => api.cancel("j1")],
    ["resume", () => api.resume("j1")],
    ["revoke (DELETE)", () => api.revokeToken("t1")],
    ["logout", () => api.logout()],
  ])("%s without parameters still sends JSON {} and the CSRF token", async (_, call) => {
    await call();
    expect(sent).toHaveLength(1);
    expect(sent[0].headers["Content-Type"]).toBe("application/json");
    expect(sent[0].headers["X-CSRF-Token"]).toBe("csrf-123");
    expect(sent[0].body).toBe("{}");
    expect(sent[0].credentials).toBe("same-origin");
  });

  it("sends a command's parameters as JSON with the token", async () => {
    await api.release("s1", "left the company");
    await api.setRole("u 1", "operator");
    expect(sent[0]).toMatchObject({ method: "POST", url: "/api/slots/s1/release", body: '{"reason":"left the company"}' });
    expect(sent[1]).toMatchObject({ method: "PUT", url: "/api/admin/users/u%201/role", body: '{"role":"operator"}' });
    for (const s of sent) expect(s.headers["X-CSRF-Token"]).toBe("csrf-123");
  });

  it("sends no body, content type or token with a read, and no actor header at all", async () => {
    answer = () => jsonResponse({ slots: [], position: 0 });
    await api.slots();
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
    await expect(api.slots()).rejects.toMatchObject({ status: 401 });
    expect(handler).toHaveBeenCalledTimes(1);
    await expect(api.me()).rejects.toMatchObject({ status: 401 });
    await expect(api.login("a", "b")).rejects.toMatchObject({ status: 401 });
    expect(handler).toHaveBeenCalledTimes(1);
  });

  it("a 403 names the missing permission", async () => {
    answer = () =>
      jsonResponse({ error: { code: "forbidden", message: "role member lacks slot.teardown", details: { permission: "slot.teardown" } } }, 403);
    const e = await api.teardown("s1").catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).permission).toBe("slot.teardown");
  });

  it("a 429 keeps Retry-After", async () => {
    answer = () =>
      new Response(JSON.stringify({ error: { code: "too_many", message: "slow down" } }), {
        status: 429,
        headers: { "Content-Type": "application/json", "Retry-After": "7" },
      });
    const e = (await api.login("a", "b").catch((x: unknown) => x)) as ApiError;
    expect(e.status).toBe(429);
    expect(e.details.retry_after).toBe("7");
  });

  it("reads admin lists bare or wrapped", async () => {
    answer = () => jsonResponse({ users: [{ id: "1", name: "a", role: "admin" }] });
    expect(await api.users()).toEqual([{ id: "1", name: "a", role: "admin" }]);
    answer = () => jsonResponse([{ id: "t", name: "ci", role: "viewer" }]);
    expect(await api.tokens()).toEqual([{ id: "t", name: "ci", role: "viewer" }]);
  });
});
