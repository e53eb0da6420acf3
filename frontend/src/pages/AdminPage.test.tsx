import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { jsonResponse } from "../test/fakes";
import { AdminPage, tokenState } from "./AdminPage";

interface Call {
  method: string;
  url: string;
  body: unknown;
}
let calls: Call[];
let users: { id: string; name: string; role: string }[];
let tokens: { id: string; name: string; role: string; expires_at: string; revoked?: boolean }[];

beforeEach(() => {
  setLang("en");
  setAuthForTest({ id: "user:u-root", name: "root", role: "admin" });
  calls = [];
  users = [{ id: "u-root", name: "root", role: "admin" }];
  tokens = [{ id: "t-1", name: "ci", role: "viewer", expires_at: "2999-01-01T00:00:00Z" }];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? "GET";
      const body: unknown = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
      calls.push({ method, url, body });
      if (url === "/api/admin/users" && method === "GET") return jsonResponse({ users });
      if (url === "/api/admin/users" && method === "POST") {
        const b = body as { name: string; role: string; password?: string };
        users = [...users, { id: `u-${b.name}`, name: b.name, role: b.role }];
        return jsonResponse({ id: `u-${b.name}`, name: b.name, role: b.role, ...(b.password ? {} : { password: "gen-pass-1" }) }, 201);
      }
      const role = /^\/api\/admin\/users\/([^/]+)\/role$/.exec(url);
      if (role && method === "PUT") {
        users = users.map((u) => (u.id === decodeURIComponent(role[1]) ? { ...u, role: (body as { role: string }).role } : u));
        return new Response(null, { status: 204 });
      }
      if (url === "/api/admin/tokens" && method === "GET") return jsonResponse({ tokens });
      if (url === "/api/admin/tokens" && method === "POST") {
        const b = body as { name: string; role: string };
        tokens = [...tokens, { id: "t-2", name: b.name, role: b.role, expires_at: "2999-01-01T00:00:00Z" }];
        return jsonResponse({ id: "t-2", token: "skt_secret_value" }, 201);
      }
      if (url.startsWith("/api/admin/tokens/") && method === "DELETE") {
        tokens = tokens.map((t) => (t.id === "t-1" ? { ...t, revoked_at: "2026-06-01T00:00:00Z", state: "revoked" } : t));
        return new Response(null, { status: 204 });
      }
      return jsonResponse({ error: { code: "not_found", message: "no" } }, 404);
    }),
  );
});

const flush = () => act(async () => {});

describe("admin page", () => {
  it("is for admins only", () => {
    setAuthForTest({ id: "u-op", name: "op", role: "operator" });
    render(<AdminPage />);
    expect(screen.getByTestId("admin-forbidden")).toBeTruthy();
    expect(calls).toEqual([]);
  });

  it("creates a user and shows the generated password once", async () => {
    render(<AdminPage />);
    await flush();
    fireEvent.change(screen.getByTestId("user-name"), { target: { value: "bob" } });
    fireEvent.change(screen.getByTestId("user-role"), { target: { value: "operator" } });
    await act(async () => {
      fireEvent.click(screen.getByTestId("user-create"));
    });
    await flush();
    expect(calls.find((c) => c.method === "POST")?.body).toEqual({ name: "bob", role: "operator" });
    expect((screen.getByTestId("user-secret-value") as HTMLInputElement).value).toBe("gen-pass-1");
    expect(screen.getAllByTestId("user-row").map((r) => r.getAttribute("data-user"))).toEqual(["root", "bob"]);
    fireEvent.click(screen.getByTestId("user-secret-done"));
    expect(screen.queryByTestId("user-secret")).toBeNull();
  });

  it("sends a typed password and shows nothing secret afterwards", async () => {
    render(<AdminPage />);
    await flush();
    fireEvent.change(screen.getByTestId("user-name"), { target: { value: "cy" } });
    fireEvent.change(screen.getByTestId("user-password"), { target: { value: "long enough pw" } });
    await act(async () => {
      fireEvent.click(screen.getByTestId("user-create"));
    });
    expect(calls.find((c) => c.method === "POST")?.body).toEqual({ name: "cy", role: "member", password: "long enough pw" });
    expect(screen.queryByTestId("user-secret")).toBeNull();
  });

  it("changes a user's role", async () => {
    users = [...users, { id: "u-bob", name: "bob", role: "member" }];
    render(<AdminPage />);
    await flush();
    const me = screen.getAllByTestId("user-row")[0];
    expect(me.textContent).toMatch(/root \(you\)/);
    expect((within(me).getByTestId("user-row-role") as HTMLSelectElement).disabled).toBe(true);
    const row = screen.getAllByTestId("user-row")[1];
    await act(async () => {
      fireEvent.change(within(row).getByTestId("user-row-role"), { target: { value: "operator" } });
    });
    await flush();
    expect(calls.find((c) => c.method === "PUT")).toEqual({ method: "PUT", url: "/api/admin/users/u-bob/role", body: { role: "operator" } });
    expect((within(screen.getAllByTestId("user-row")[1]).getByTestId("user-row-role") as HTMLSelectElement).value).toBe("operator");
  });

  it("creates a token, shows it once with a copy button, and lists tokens without secrets", async () => {
    const writeText = vi.fn(async () => undefined);
    vi.stubGlobal("navigator", { ...navigator, clipboard: { writeText } });
    render(<AdminPage />);
    await flush();
    fireEvent.change(screen.getByTestId("token-name"), { target: { value: "deploy" } });
    fireEvent.change(screen.getByTestId("token-role"), { target: { value: "operator" } });
    fireEvent.change(screen.getByTestId("token-expires"), { target: { value: "168h" } });
    await act(async () => {
      fireEvent.click(screen.getByTestId("token-create"));
    });
    await flush();
    expect(calls.find((c) => c.method === "POST")?.body).toEqual({ name: "deploy", role: "operator", expires: "168h" });
    expect((screen.getByTestId("token-secret-value") as HTMLInputElement).value).toBe("skt_secret_value");
    await act(async () => {
      fireEvent.click(screen.getByTestId("token-secret-copy"));
    });
    expect(writeText).toHaveBeenCalledWith("skt_secret_value");
    expect(screen.getByTestId("token-secret").textContent).toMatch(/Copied\./);
    expect(screen.getByTestId("tokens-table").textContent).not.toMatch(/skt_secret_value/);
    fireEvent.click(screen.getByTestId("token-secret-done"));
    expect(document.body.textContent).not.toMatch(/skt_secret_value/);
  });

  it("revokes a token only after a second click", async () => {
    render(<AdminPage />);
    await flush();
    fireEvent.click(screen.getByTestId("token-revoke"));
    expect(calls.some((c) => c.method === "DELETE")).toBe(false);
    await act(async () => {
      fireEvent.click(screen.getByTestId("token-revoke-confirm"));
    });
    await flush();
    expect(calls.filter((c) => c.method === "DELETE")).toEqual([{ method: "DELETE", url: "/api/admin/tokens/t-1", body: {} }]);
    expect(screen.getByTestId("token-row").getAttribute("data-state")).toBe("revoked");
  });

  it("tells revoked, expired and active tokens apart", () => {
    const now = Date.parse("2026-06-01T00:00:00Z");
    expect(tokenState({ id: "a", name: "a", role: "viewer", expires_at: "2026-07-01T00:00:00Z" }, now)).toBe("active");
    expect(tokenState({ id: "a", name: "a", role: "viewer", expires_at: "2026-05-01T00:00:00Z" }, now)).toBe("expired");
    expect(tokenState({ id: "a", name: "a", role: "viewer", revoked_at: "2026-05-01T00:00:00Z" }, now)).toBe("revoked");
    // The server's own word wins over the page's clock.
    expect(tokenState({ id: "a", name: "a", role: "viewer", expires_at: "2026-07-01T00:00:00Z", state: "expired" }, now)).toBe("expired");
  });
});
