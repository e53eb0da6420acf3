import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import { resetAuth, setAuthForTest } from "./auth/session";
import { setLang } from "./i18n";
import { jsonResponse } from "./test/fakes";

let calls: { method: string; url: string; csrf?: string }[];

beforeEach(() => {
  setLang("en");
  calls = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? "GET";
      calls.push({ method, url, csrf: (init?.headers as Record<string, string> | undefined)?.["X-CSRF-Token"] });
      if (url === "/api/auth/logout") return new Response(null, { status: 204 });
      return jsonResponse({ slots: [], position: 0 });
    }),
  );
});

describe("app shell", () => {
  it("shows only the sign-in page while signed out, keeping the route asked for", () => {
    window.location.hash = "#/audit";
    resetAuth({ status: "signed_out", methods: ["local"], expired: false });
    render(<App />);
    expect(screen.getByTestId("signin-page")).toBeTruthy();
    expect(screen.queryByRole("navigation")).toBeNull();
    expect(screen.queryByTestId("whoami")).toBeNull();
    expect(screen.queryByTestId("live-indicator")).toBeNull();
    expect(window.location.hash).toBe("#/audit");
  });

  it("names who is signed in with the role, links admins to the admin page, and signs out", async () => {
    setAuthForTest({ id: "u1", name: "root", role: "admin" }, "c-9");
    render(<App />);
    expect(screen.getByTestId("whoami-name").textContent).toBe("root");
    expect(screen.getByTestId("whoami-role").textContent).toBe("admin");
    expect(screen.getByTestId("nav-admin")).toBeTruthy();
    await act(async () => {
      fireEvent.click(screen.getByTestId("signout"));
    });
    expect(calls.filter((c) => c.method === "POST")).toEqual([{ method: "POST", url: "/api/auth/logout", csrf: "c-9" }]);
    expect(screen.getByTestId("signin-page")).toBeTruthy();
  });

  it("an unknown route shows a not-found page in en and ko, not the board (issue 14)", () => {
    setAuthForTest({ id: "u1", name: "root", role: "admin" }, "c-9");
    window.location.hash = "#/slotz/nope";
    render(<App />);
    expect(screen.getByTestId("route-not-found").textContent).toMatch(/There is no page at \/slotz\/nope/);
    expect(screen.queryByTestId("board")).toBeNull();
    cleanup();
    setLang("ko");
    render(<App />);
    expect(screen.getByTestId("route-not-found").textContent).toMatch(/페이지가 없습니다/);
  });

  it("has no admin link for other roles, and says the role in Korean", () => {
    setLang("ko");
    setAuthForTest({ id: "u2", name: "김민준", role: "member" });
    render(<App />);
    expect(screen.queryByTestId("nav-admin")).toBeNull();
    expect(screen.getByTestId("whoami-role").textContent).toBe("구성원");
    expect(screen.getByTestId("signout").textContent).toBe("로그아웃");
  });
});
