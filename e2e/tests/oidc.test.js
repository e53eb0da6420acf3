// OpenID Connect sign-in in real Chromium against the real binary and a
// real provider process on loopback (e2e/lib/oidc.js, mockoidc): the role
// comes from the provider's groups, the server decides what the role may
// do, a session survives a restart of the server, logout ends it on the
// server, and an idle session sends the browser back to the sign-in page.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { OIDCProvider } from "../lib/oidc.js";
import { appUrl, serverFlags, waitLive } from "../lib/app.js";

let op;
let server;
let browser;

const ROLE_MAP = "sre=operator,eng=member";

before(async () => {
  op = await new OIDCProvider().start();
  // No deadline warnings: a demo slot's 10-minute warning falls about two
  // minutes after the start, and would land in a "nothing appended" window.
  server = new Server({ flags: serverFlags(op.flags({ "oidc-role-map": ROLE_MAP, "warn-before": "" })) });
  await server.start();
  for (const f of ["oidc-issuer", "oidc-role-map", "session-idle"]) {
    assert.ok(!server.skippedFlags.includes(f), `serve has --${f}`);
  }
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await server?.close();
  await op?.close();
});

/** inPage calls the API from the page itself, as its own script would (same origin, its session and CSRF token). */
function inPage(page, method, path, body) {
  return page.evaluate(
    async ([m, p, b]) => {
      const me = await (await fetch("/api/auth/me")).json();
      const r = await fetch(p, { method: m, headers: { "Content-Type": "application/json", "X-CSRF-Token": me.csrf }, body: b });
      return { status: r.status, body: await r.json().catch(() => null) };
    },
    [method, path, JSON.stringify(body ?? {})],
  );
}

/** sessionCookie is the browser's session cookie as a Cookie header. */
async function sessionCookie() {
  const c = (await browser.context.cookies(server.url)).find((k) => k.name === "slotkeeper_session");
  assert.ok(c, "the browser holds a session cookie");
  assert.equal(c.httpOnly, true);
  assert.equal(c.sameSite, "Lax");
  return `${c.name}=${c.value}`;
}

async function meWith(cookie) {
  return (await fetch(`${server.url}/api/auth/me`, { headers: { Cookie: cookie }, signal: AbortSignal.timeout(10_000) })).status;
}

/** ssoSignIn clicks "sign in with single sign-on" and follows the provider back to the dashboard. */
async function ssoSignIn(page, user, role) {
  await op.queue(user);
  await page.goto(appUrl(server, "/"));
  await page.waitForSelector("[data-testid=signin-oidc]", { timeout: 15_000 });
  const atProvider = page.waitForRequest((r) => r.url().startsWith(op.issuer), { timeout: 15_000 });
  await page.click("[data-testid=signin-oidc]");
  const authz = new URL((await atProvider).url());
  // Authorization code + PKCE, with state and nonce.
  assert.equal(authz.searchParams.get("response_type"), "code");
  assert.equal(authz.searchParams.get("code_challenge_method"), "S256");
  assert.ok(authz.searchParams.get("state") && authz.searchParams.get("nonce"));
  await page.waitForSelector(`[data-testid=whoami][data-role="${role}"]`, { timeout: 15_000 });
  assert.equal(await page.textContent("[data-testid=whoami-name]"), user.preferred_username);
}

test("SSO sign-in: the role from the groups, allowed and refused commands, restart, logout", async () => {
  const page = await browser.context.newPage();
  await ssoSignIn(page, { sub: "sub-sam", preferred_username: "sam", email: "sam@corp.internal", groups: ["eng", "sre"] }, "operator");
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-card]");
  assert.equal(await page.$("[data-testid=nav-admin]"), null, "no admin link for an operator");
  await shot(page, "oidc-signed-in-operator");

  // Allowed for an operator: extend somebody else's slot. The audit names sam.
  const { slots } = await server.api("GET", "/api/slots");
  const busy = slots.find((s) => s.lifecycle === "occupied" && !s.active_job && s.occupant !== "sam");
  assert.ok(busy, "an occupied demo slot");
  const until = new Date(Date.parse(busy.deadline ?? new Date().toISOString()) + 3_600_000).toISOString();
  const ok = await inPage(page, "POST", `/api/slots/${busy.name}/extend`, { until });
  assert.equal(ok.status, 200, `extend: ${JSON.stringify(ok.body)}`);
  const audit = await server.api("GET", `/api/audit?slot=${busy.name}&limit=1000`);
  assert.ok(audit.entries.some((e) => e.actor === "sam"), "the audit names the signed-in subject");

  // Refused: registering a slot needs admin. 403 naming the permission, nothing appended.
  const p0 = (await server.api("GET", "/api/slots")).position;
  const refused = await inPage(page, "POST", "/api/slots", {
    name: "sso-new", project_uuid: "p", app_uuid: "a", db_uuid: "d",
    repo: { project: "SLOT", slug: "sso-new" }, template_repo: { project: "TPL", slug: "template" }, template_ref: "main",
  });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.error.details.permission, "slot.register");
  assert.deepEqual((await server.api("GET", `/api/audit?after=${p0}&limit=1000`)).entries ?? [], [], "a refused command appends nothing");

  // The server restarts: the session is in the log, so the tab stays signed in.
  const cookie = await sessionCookie();
  await server.stop();
  await server.start();
  assert.equal(await meWith(cookie), 200, "the session survives a restart");
  await waitLive(page, 30_000);
  assert.equal(await page.$("[data-testid=signin-page]"), null, "the tab did not fall back to the sign-in page");

  // Logout: the sign-in page, and the old cookie no longer works.
  await page.click("[data-testid=signout]");
  await page.waitForSelector("[data-testid=signin-page]");
  assert.equal(await meWith(cookie), 401, "the session cookie is refused after logout");
  await page.close();

  // A user whose groups map to no role is refused; nothing appended.
  const p1 = (await server.api("GET", "/api/slots")).position;
  const eve = await browser.context.newPage();
  await op.queue({ sub: "sub-eve", preferred_username: "eve", groups: ["marketing"] });
  const answer = eve.waitForResponse((r) => r.url().includes("/api/auth/oidc/callback"), { timeout: 15_000 });
  await eve.goto(`${server.url}/api/auth/oidc/login`);
  assert.equal((await answer).status(), 401);
  assert.deepEqual((await server.api("GET", `/api/audit?after=${p1}&limit=1000`)).entries ?? [], [], "a refused SSO sign-in appends nothing");
  await eve.close();
});

test("an idle SSO session ends: the open dashboard goes back to the sign-in page", async () => {
  const IDLE_MS = 3000;
  await server.stop();
  server.flags = { ...server.flags, "session-idle": `${IDLE_MS / 1000}s` };
  await server.start();
  const page = await browser.context.newPage();
  await ssoSignIn(page, { sub: "sub-mo", preferred_username: "mo", groups: ["eng"] }, "member");
  await waitLive(page);
  const cookie = await sessionCookie();
  const t0 = Date.now();
  // Nobody clicks; the open stream is not activity. The server ends the
  // stream when the session idles out, the dashboard's reconnect is
  // refused, and it shows the sign-in page saying the session ended.
  await page.waitForSelector("[data-testid=signin-expired]", { timeout: IDLE_MS + 20_000 });
  assert.ok(Date.now() - t0 >= IDLE_MS - 1000, `expired after ${Date.now() - t0} ms, before the idle time`);
  assert.equal(await meWith(cookie), 401, "the idle session is refused");
  await shot(page, "oidc-session-expired");
  await page.close();
});
