import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { getAuth, resetAuth } from "../auth/session";
import { setLang } from "../i18n";
import { jsonResponse } from "../test/fakes";
import { OIDC_LOGIN, SignIn } from "./SignIn";

let login: (body: { name: string; password: string }) => Response;
let sent: { name: string; password: string }[];

beforeEach(() => {
  setLang("en");
  resetAuth({ status: "signed_out", methods: ["local"], expired: false });
  sent = [];
  login = () => jsonResponse({ subject: { id: "u1", name: "ada", role: "member" }, csrf: "c" });
  vi.stubGlobal(
    "fetch",
    vi.fn(async (_url: string, init?: RequestInit) => {
      const body = JSON.parse(String(init?.body)) as { name: string; password: string };
      sent.push(body);
      return login(body);
    }),
  );
});

async function submit(name: string, password: string) {
  fireEvent.change(screen.getByTestId("signin-name"), { target: { value: name } });
  fireEvent.change(screen.getByTestId("signin-password"), { target: { value: password } });
  await act(async () => {
    fireEvent.click(screen.getByTestId("signin-submit"));
  });
}

describe("sign-in page", () => {
  it("signs in with the typed name and password", async () => {
    render(<SignIn methods={["local"]} expired={false} />);
    await submit(" ada ", "secret");
    expect(sent).toEqual([{ name: "ada", password: "secret" }]);
    expect(getAuth()).toMatchObject({ status: "signed_in", subject: { name: "ada" } });
  });

  it("says the same thing for an unknown user and a wrong password, and clears the password", async () => {
    login = () => jsonResponse({ error: { code: "unauthenticated", message: "invalid credentials" } }, 401);
    render(<SignIn methods={["local"]} expired={false} />);
    await submit("ada", "nope");
    expect(screen.getByTestId("signin-error").textContent).toBe("Wrong user name or password.");
    expect((screen.getByTestId("signin-password") as HTMLInputElement).value).toBe("");
    // Switching the language rewords the message already shown.
    act(() => setLang("ko"));
    expect(screen.getByTestId("signin-error").textContent).toBe("사용자 이름 또는 비밀번호가 틀렸습니다.");
    act(() => setLang("en"));
    expect(screen.getByTestId("signin-password").getAttribute("aria-invalid")).toBe("true");
    expect(getAuth().status).toBe("signed_out");
  });

  it("says how long to wait when rate-limited", async () => {
    login = () =>
      new Response(JSON.stringify({ error: { code: "too_many", message: "slow down" } }), {
        status: 429,
        headers: { "Retry-After": "30" },
      });
    render(<SignIn methods={["local"]} expired={false} />);
    await submit("ada", "x");
    expect(screen.getByTestId("signin-error").textContent).toBe("Too many attempts. Try again in 30 s.");
  });

  it("says how long to wait when the server runs too many password checks at once (503, issue 33)", async () => {
    login = () =>
      new Response(JSON.stringify({ error: { code: "unavailable", message: "too many sign-ins at once" } }), {
        status: 503,
        headers: { "Retry-After": "1" },
      });
    render(<SignIn methods={["local"]} expired={false} />);
    await submit("ada", "x");
    expect(screen.getByTestId("signin-error").textContent).toBe("Too many attempts. Try again in 1 s.");
  });

  it("offers Continue as demo-admin in the loopback demo: a POST, not a form no credential passes (issue 25/27)", async () => {
    const asked: string[] = [];
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string, init?: RequestInit) => {
        asked.push(`${init?.method ?? "GET"} ${url}`);
        return jsonResponse({ subject: { id: "user:d1", name: "demo-admin", role: "admin" }, csrf: "c-demo" });
      }),
    );
    render(<SignIn methods={["local", "demo"]} expired={false} />);
    expect(screen.getByTestId("signin-demo").textContent).toBe("Continue as demo-admin");
    await act(async () => {
      fireEvent.click(screen.getByTestId("signin-demo"));
    });
    expect(asked).toEqual(["POST /api/auth/demo"]);
    expect(getAuth()).toMatchObject({ status: "signed_in", subject: { name: "demo-admin" } });
    cleanup();
    render(<SignIn methods={["local"]} expired={false} />);
    expect(screen.queryByTestId("signin-demo")).toBeNull();
  });

  it("offers single sign-on when the server does", () => {
    render(<SignIn methods={["local", "oidc"]} expired={false} />);
    expect(screen.getByTestId("signin-oidc").getAttribute("href")).toBe(OIDC_LOGIN);
    cleanup();
    render(<SignIn methods={["local"]} expired={false} />);
    expect(screen.queryByTestId("signin-oidc")).toBeNull();
  });

  it("speaks Korean and says when a session ended", async () => {
    setLang("ko");
    login = () => jsonResponse({ error: { code: "unauthenticated", message: "x" } }, 401);
    render(<SignIn methods={["local"]} expired={true} />);
    expect(screen.getByRole("heading").textContent).toBe("로그인");
    expect(screen.getByTestId("signin-expired").textContent).toMatch(/세션이 끝났습니다/);
    await submit("ada", "x");
    expect(screen.getByTestId("signin-error").textContent).toBe("사용자 이름 또는 비밀번호가 틀렸습니다.");
  });
});
