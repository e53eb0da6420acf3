import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { getCsrf } from "../services/http";
import { resetAuth, setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { jsonResponse } from "../test/fakes";
import { AccountPage } from "./AccountPage";

let sent: { body: unknown; csrf?: string }[];
let answer: () => Response;

beforeEach(() => {
  setLang("en");
  setAuthForTest({ id: "user:u1", name: "ada", role: "member" }, "old-csrf");
  sent = [];
  answer = () => jsonResponse({ subject: { id: "user:u1", name: "ada", role: "member" }, csrf: "new-csrf" });
  vi.stubGlobal(
    "fetch",
    vi.fn(async (_url: string, init?: RequestInit) => {
      sent.push({ body: JSON.parse(String(init?.body)), csrf: (init?.headers as Record<string, string>)["X-CSRF-Token"] });
      return answer();
    }),
  );
});

async function fill(current: string, next: string, repeat = next) {
  fireEvent.change(screen.getByTestId("pw-current"), { target: { value: current } });
  fireEvent.change(screen.getByTestId("pw-new"), { target: { value: next } });
  fireEvent.change(screen.getByTestId("pw-repeat"), { target: { value: repeat } });
  await act(async () => {
    fireEvent.click(screen.getByTestId("pw-submit"));
  });
}

describe("account page", () => {
  it("changes the password and adopts the rotated session's CSRF token", async () => {
    render(<AccountPage />);
    await fill("old password 1", "new password 12");
    expect(sent).toEqual([{ body: { current: "old password 1", new: "new password 12" }, csrf: "old-csrf" }]);
    expect(screen.getByTestId("pw-changed")).toBeTruthy();
    expect(getCsrf()).toBe("new-csrf");
  });

  it("checks length and repetition before sending anything", async () => {
    render(<AccountPage />);
    await fill("old password 1", "short");
    expect(screen.getByTestId("pw-problem").textContent).toMatch(/at least 10/);
    await fill("old password 1", "new password 12", "new password 13");
    expect(screen.getByTestId("pw-problem").textContent).toBe("The two new passwords differ.");
    expect(sent).toEqual([]);
  });

  it("says when the current password is wrong", async () => {
    answer = () => jsonResponse({ error: { code: "invalid", message: "the current password is wrong", details: { field: "current" } } }, 400);
    render(<AccountPage />);
    await fill("wrong one 123", "new password 12");
    expect(screen.getByTestId("pw-wrong").textContent).toBe("The current password is wrong.");
    expect(getCsrf()).toBe("old-csrf");
  });

  it("the demo's demo-admin is not asked for a current password it does not have (issue 27)", () => {
    resetAuth({ status: "signed_in", subject: { id: "user:d1", name: "demo-admin", role: "admin" }, methods: ["local", "demo"], passwordChange: false });
    render(<AccountPage />);
    expect(screen.queryByTestId("pw-current")).toBeNull();
    expect(screen.getByTestId("account-no-password").textContent).toContain("no password to change");
  });

  it("an API token has no password to change", () => {
    setAuthForTest({ id: "token:t1", name: "ci", role: "viewer" });
    render(<AccountPage />);
    expect(screen.queryByTestId("pw-current")).toBeNull();
  });
});
