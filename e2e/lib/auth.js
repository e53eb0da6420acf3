// Accounts for the e2e servers and signing in the way a person does.
// Accounts and tokens are made with `slotkeeper admin create-user|create-token`
// on the server's data dir before it starts (the embedded store admits one
// process), which prints the password or token once.
import assert from "node:assert/strict";
import { appUrl } from "./app.js";

/** createUser makes a local account (server stopped) and returns {name, role, password}. */
export function createUser(server, name, role) {
  return { ...server.createUser(name, role), role };
}

/**
 * prepareAuth (before server.start) creates the UI user the tests sign in
 * as and an admin API token that server.api() sends, so the tests' own
 * setup calls are authenticated too. Returns the user.
 */
export function prepareAuth(server, { name = "e2e-admin", role = "admin", users = [] } = {}) {
  server.token = server.createToken("e2e-api", "admin");
  server.user = createUser(server, name, role);
  server.users = Object.fromEntries(users.map(([n, r]) => [n, createUser(server, n, r)]));
  return server.user;
}

/** signInOnPage fills the sign-in page that `page` shows and waits for the header to name the user. */
export async function signInOnPage(page, user) {
  await page.waitForSelector("[data-testid=signin-page]", { timeout: 15_000 });
  await page.fill("[data-testid=signin-name]", user.name);
  await page.fill("[data-testid=signin-password]", user.password);
  await page.click("[data-testid=signin-submit]");
  // Attached, not visible: on a phone who is signed in sits behind the Menu button.
  await page.waitForSelector(`[data-testid=whoami][data-role="${user.role}"]`, { state: "attached", timeout: 15_000 });
  const shown = await page.textContent("[data-testid=whoami-name]");
  assert.equal(shown, user.name, "the header names who signed in");
}

/**
 * signInAsDemo presses the loopback demo's "Continue as demo-admin" on the
 * sign-in page `page` shows (the demo signs a browser in by itself only on
 * its first visit) and waits for the header to name demo-admin.
 */
export async function signInAsDemo(page) {
  await page.waitForSelector("[data-testid=signin-demo]", { timeout: 15_000 });
  await page.click("[data-testid=signin-demo]");
  await page.waitForSelector('[data-testid=whoami][data-role="admin"]', { timeout: 15_000 });
  assert.equal(await page.textContent("[data-testid=whoami-name]"), "demo-admin", "the header names demo-admin");
}

/**
 * signIn signs a browser context in through the sign-in page (its cookie
 * then serves every page the context opens) and closes that page.
 */
export async function signIn(context, server, user = server.user) {
  const page = await context.newPage();
  try {
    await page.goto(appUrl(server, "/"));
    await signInOnPage(page, user);
  } finally {
    await page.close();
  }
}

/**
 * session signs in over HTTP (no browser) and returns a caller that sends
 * the session cookie and the CSRF token, as the dashboard does.
 */
export async function session(server, user) {
  const r = await fetch(`${server.url}/api/auth/login`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: user.name, password: user.password }),
  });
  assert.equal(r.status, 200, `sign in as ${user.name}: ${r.status} ${await r.clone().text()}`);
  const cookie = r.headers.getSetCookie().map((c) => c.split(";")[0]).join("; ");
  const { csrf, subject } = await r.json();
  return {
    subject,
    /** call returns {status, body} and never throws on an HTTP error. */
    async call(method, path, body) {
      const headers = { Cookie: cookie };
      if (method !== "GET") {
        headers["Content-Type"] = "application/json";
        headers["X-CSRF-Token"] = csrf;
      }
      const res = await fetch(server.url + path, {
        method,
        headers,
        body: method === "GET" ? undefined : JSON.stringify(body ?? {}),
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
  };
}
