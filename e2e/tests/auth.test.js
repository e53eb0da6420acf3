// Sign-in, roles and cross-origin attacks in real Chromium against the real
// binary (issue 11). Accounts are made with `slotkeeper admin` before the
// server starts; automatic demo sign-in is off except in the last test.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { Attacker, RecordingProxy } from "../lib/attacker.js";
import { prepareAuth, signInAsDemo, signInOnPage } from "../lib/auth.js";
import { appUrl, pickSlot, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;
let attacker;
let recorder;

const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1366, height: 900 };

before(async () => {
  // No deadline warnings: a demo slot's 10-minute warning falls about two
  // minutes after the start, inside the "nothing was appended" windows.
  server = new Server({ flags: serverFlags({ "warn-before": "" }) });
  prepareAuth(server, { users: [["mia", "member"]] });
  await server.start();
  if (server.skippedFlags.length) console.log(`# serve lacks flags: ${server.skippedFlags.join(", ")}`);
  browser = await openBrowser();
  // The attack pages send to a recording proxy in front of the server (same
  // loopback address, another port: the same site for cookies), so the test
  // sees exactly what reached the server.
  recorder = await new RecordingProxy(server.port).start();
  attacker = await new Attacker(recorder.url).start();
});

after(async () => {
  await attacker?.close();
  await recorder?.close();
  await browser?.close();
  await server?.close();
});

/** position is the read model's position: every append moves it. */
async function position() {
  return (await server.api("GET", "/api/slots")).position;
}

/** appendedSince lists the audit entries after position p. */
async function appendedSince(p) {
  return (await server.api("GET", `/api/audit?after=${p}&limit=1000`)).entries ?? [];
}

/** inPage calls the API from the page itself, as its own script would (same origin, its session). */
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

/** snap scrolls to the top first: the sticky header would otherwise sit mid-page in a full-page shot. */
async function snap(page, name) {
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, name);
}

async function setLang(page, lang) {
  await page.selectOption("[data-testid=lang]", lang);
  await page.waitForFunction((l) => document.documentElement.lang === l, lang);
}

test("sign-in page: a wrong password and an unknown user get the same message; sign in and out", async () => {
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, "/"));
  await page.waitForSelector("[data-testid=signin-page]");
  // Nothing of the pool is shown, and no stream is open, before sign-in.
  assert.equal(await page.$("[data-testid=board]"), null);
  assert.equal(await page.$("nav"), null);
  await snap(page, "signin-en-desktop");

  const tryOnce = async (name, password) => {
    await page.fill("[data-testid=signin-name]", name);
    await page.fill("[data-testid=signin-password]", password);
    const answer = page.waitForResponse((r) => r.url().endsWith("/api/auth/login"));
    await page.click("[data-testid=signin-submit]");
    const status = (await answer).status();
    await page.waitForSelector("[data-testid=signin-error]");
    return { status, text: await page.textContent("[data-testid=signin-error]") };
  };
  const wrong = await tryOnce("mia", "not-the-password");
  const unknown = await tryOnce("nobody-here", "not-the-password");
  assert.equal(wrong.status, 401);
  assert.equal(unknown.status, 401);
  assert.equal(wrong.text, "Wrong user name or password.");
  assert.equal(unknown.text, wrong.text, "the same message for an unknown user and a wrong password");
  assert.equal(await page.inputValue("[data-testid=signin-password]"), "", "the password box is cleared");
  await snap(page, "signin-en-wrong-password");

  // Korean and a phone.
  await setLang(page, "ko");
  await page.setViewportSize(PHONE);
  assert.equal(await page.textContent("#signin-title"), "로그인");
  await snap(page, "signin-ko-phone");
  await page.setViewportSize(DESKTOP);
  await snap(page, "signin-ko-desktop");
  await page.setViewportSize(PHONE);
  await setLang(page, "en");
  await snap(page, "signin-en-phone");
  await page.setViewportSize(DESKTOP);

  await signInOnPage(page, server.users.mia);
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-card]");
  assert.equal(await page.textContent("[data-testid=whoami-role]"), "member");
  assert.equal(await page.$("[data-testid=nav-admin]"), null, "no admin link for a member");
  await snap(page, "header-en-desktop");

  // Her own password, changed from the account page (the name in the header links there).
  const mia = server.users.mia;
  const other = await (await fetch(`${server.url}/api/auth/login`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: mia.name, password: mia.password }),
  })).headers.getSetCookie()[0].split(";")[0];
  await page.click("[data-testid=whoami-name]");
  await page.waitForSelector("[data-testid=account-page]");
  const fresh = `${mia.password}-2nd`;
  await page.fill("[data-testid=pw-current]", mia.password);
  await page.fill("[data-testid=pw-new]", fresh);
  await page.fill("[data-testid=pw-repeat]", fresh);
  await page.click("[data-testid=pw-submit]");
  await page.waitForSelector("[data-testid=pw-changed]");
  mia.password = fresh;
  // This tab goes on with the rotated session …
  const still = await page.evaluate(async () => (await fetch("/api/auth/me")).json());
  assert.equal(still.signed_in, true, "the tab is still signed in");
  // … and her other session is over.
  assert.equal((await fetch(`${server.url}/api/slots`, { headers: { Cookie: other } })).status, 401, "the other session ended");

  await page.click("[data-testid=signout]");
  await page.waitForSelector("[data-testid=signin-page]");
  // The session is over on the server too.
  const after = await page.evaluate(async () => (await fetch("/api/slots")).status);
  assert.equal(after, 401, "signed out on the server");
  await page.close();
});

test("a member sees no teardown, and the API refuses it with 403 naming the permission", async () => {
  const mia = server.users.mia;
  // A slot mia occupies, and one somebody else does.
  const { slots } = await server.api("GET", "/api/slots");
  const vacant = slots.find((s) => s.lifecycle === "vacant" && !s.active_job);
  assert.ok(vacant, "a vacant demo slot");
  await server.api("POST", `/api/slots/${vacant.name}/occupy`, { by: mia.name, until: new Date(Date.now() + 3_600_000).toISOString() });
  const other = slots.find((s) => s.lifecycle === "occupied" && !s.active_job && s.occupant !== mia.name);
  assert.ok(other, "a slot somebody else occupies");

  const page = await browser.context.newPage();
  await page.goto(appUrl(server, `/slots/${vacant.name}`));
  await signInOnPage(page, mia);
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-page]");
  assert.ok(await page.$("[data-testid=release]"), "a member may release their own slot");
  assert.ok(await page.$("[data-testid=extend]"));
  assert.equal(await page.$("[data-testid=teardown]"), null, "no teardown for a member");
  assert.equal(await page.$("[data-testid=promote]"), null, "no promote for a member");
  await snap(page, "slot-member");
  await page.goto(appUrl(server, `/slots/${other.name}`));
  await page.waitForSelector("[data-testid=read-only]");
  assert.equal(await page.$("[data-testid=release]"), null, "no release of somebody else's slot");

  const p0 = await position();
  const teardown = await inPage(page, "POST", `/api/slots/${vacant.name}/teardown`);
  assert.equal(teardown.status, 403);
  assert.equal(teardown.body.error.details.permission, "slot.teardown");
  const release = await inPage(page, "POST", `/api/slots/${other.name}/release`, { reason: "mine now" });
  assert.equal(release.status, 403);
  assert.equal(release.body.error.details.permission, "slot.release_any");
  assert.deepEqual(await appendedSince(p0), [], "a refused command appends nothing");
  await page.click("[data-testid=signout]");
  await page.waitForSelector("[data-testid=signin-page]");
  await page.close();
});

test("pages of another origin cannot change anything, though the victim is signed in", async () => {
  const victim = await browser.context.newPage();
  await victim.goto(appUrl(server, "/"));
  await signInOnPage(victim, server.user); // e2e-admin: every permission
  await waitLive(victim);

  const { slots } = await server.api("GET", "/api/slots");
  const busy = slots.find((s) => s.lifecycle === "occupied" && !s.active_job);
  const vacant = slots.find((s) => s.lifecycle === "vacant" && !s.active_job);
  assert.ok(busy && vacant, "an occupied and a vacant slot");
  const until = new Date(Date.now() + 3_600_000).toISOString();
  const attacks = [
    ["form POST, empty body → teardown", "/form-empty", { slot: busy.name, cmd: "teardown" }],
    ["form POST, empty body → release", "/form-empty", { slot: busy.name, cmd: "release" }],
    ["form POST, text/plain JSON → teardown", "/form-json", { slot: busy.name, cmd: "teardown" }],
    ["no-cors fetch, JSON blob → occupy", "/nocors", { slot: vacant.name, cmd: "occupy", body: JSON.stringify({ until }) }],
    ["no-cors fetch, JSON blob → promote", "/nocors", { slot: busy.name, cmd: "promote", body: JSON.stringify({ project: "PUB", name: "stolen" }) }],
  ];

  const p0 = await position();
  const seen = [];
  for (const [what, path, params] of attacks) {
    const page = await browser.context.newPage();
    const from = recorder.requests.length;
    await page.goto(attacker.href(path, params));
    // The proxy has seen the server's answer to the attack.
    const req = await recorder.answered((r) => r.method === "POST", from);
    const h = req.headers;
    let reason = "";
    try {
      reason = JSON.parse(req.body).error?.details?.reason ?? "";
    } catch {
      reason = req.body.slice(0, 80);
    }
    seen.push({ what, status: req.status, reason, cookie: /slotkeeper_session=/.test(h.cookie ?? ""), origin: h.origin, site: h["sec-fetch-site"], type: h["content-type"] });
    await page.close();
  }
  console.log(`# attacks: ${seen.map((s) => `${s.what}: ${s.status} ${s.reason} (cookie ${s.cookie}, origin ${s.origin}, ${s.site}, ${s.type ?? "no type"})`).join("; ")}`);
  for (const s of seen) {
    // The browser really sent the victim's session (another port on the
    // same loopback address is the same site, so SameSite=Lax lets it
    // through): only the server's checks stand in the way.
    assert.ok(s.cookie, `${s.what}: the session cookie went along`);
    assert.ok(s.status === 403 || s.status === 415, `${s.what}: refused (${s.status})`);
  }
  // The CSRF token is a second wall: even the dashboard's own origin cannot
  // change anything with the session cookie alone.
  const noToken = await victim.evaluate(async (slot) => {
    const r = await fetch(`/api/slots/${slot}/teardown`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    return { status: r.status, reason: (await r.json()).error?.details?.reason };
  }, busy.name);
  assert.deepEqual(noToken, { status: 403, reason: "csrf" }, "same origin without the CSRF token is refused");
  assert.deepEqual(await appendedSince(p0), [], "nothing was appended");
  const after = await server.api("GET", `/api/slots/${busy.name}`);
  assert.ok(!after.active_job && after.lifecycle === "occupied", `${busy.name} untouched`);
  assert.equal((await server.api("GET", `/api/slots/${vacant.name}`)).lifecycle, "vacant");

  // The check above can fail: the victim's own page, same session, does append.
  const name = await pickSlot(server);
  const p1 = await position();
  await victim.goto(appUrl(server, `/slots/${name}`));
  await victim.waitForSelector("[data-testid=extend]");
  await victim.click("[data-testid=extend]");
  await victim.waitForFunction(
    // Wait for the extend itself: the server's own consumers (deadline
    // warnings, checkpoints) may append first.
    async ([p]) => ((await (await fetch(`/api/audit?after=${p}`)).json()).entries ?? []).some((e) => e.type === "OccupancyExtended"),
    [p1],
    { timeout: 15_000, polling: 200 },
  );
  const own = await appendedSince(p1);
  assert.ok(own.some((e) => e.type === "OccupancyExtended" && e.actor === server.user.name), "the same-origin command was recorded");
  await victim.close();
});

test("an operator (here an admin) releasing somebody else's slot must give a reason, and it is recorded", async () => {
  const { slots } = await server.api("GET", "/api/slots");
  const theirs = slots.find((s) => s.lifecycle === "occupied" && !s.active_job && s.occupant && !s.occupant.startsWith("e2e"));
  assert.ok(theirs, "a slot a demo person occupies");
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, `/slots/${theirs.name}`));
  if (await page.$("[data-testid=signin-page]")) await signInOnPage(page, server.user);
  await page.waitForSelector("[data-testid=release]");
  await page.click("[data-testid=release]");
  await page.waitForSelector("[data-testid=plan-steps] li");
  await page.waitForSelector("[data-testid=release-reason]");
  assert.ok(await page.$eval("[data-testid=confirm]", (b) => b.disabled), "no release without a reason");
  await page.fill("[data-testid=release-reason]", "left for the day, slot needed");
  await snap(page, "release-reason-en-desktop");
  await page.click("[data-testid=confirm]:not([disabled])");
  await page.waitForURL(/#\/jobs\/[^/]+\/wait/);
  const id = decodeURIComponent(/#\/jobs\/([^/]+)/.exec(page.url())[1]);
  const { events } = await server.api("GET", `/api/jobs/${id}/events`);
  const queued = events.find((e) => e.type === "JobQueued");
  assert.ok(JSON.stringify(queued).includes("left for the day, slot needed"), `the reason is in JobQueued: ${JSON.stringify(queued)}`);
  assert.equal(queued.meta.actor, server.user.name, "recorded under the operator's name");
  await page.close();
});

test("admin page: create a user and a token (shown once), change a role, revoke the token", async () => {
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, "/"));
  if (await page.$("[data-testid=signin-page]")) await signInOnPage(page, server.user);
  await page.waitForSelector("[data-testid=nav-admin]");
  await page.click("[data-testid=nav-admin]");
  await page.waitForSelector("[data-testid=admin-page] [data-testid=users-table]");

  // A user with a generated password, shown once.
  await page.fill("[data-testid=user-name]", "newbie");
  await page.selectOption("[data-testid=user-role]", "member");
  await page.click("[data-testid=user-create]");
  await page.waitForSelector("[data-testid=user-secret-value]");
  const password = await page.inputValue("[data-testid=user-secret-value]");
  assert.ok(password.length >= 10, "a generated password is shown");
  await page.waitForSelector('[data-testid=user-row][data-user="newbie"]');
  // Its role changed to operator.
  await page.selectOption('[data-testid=user-row][data-user="newbie"] [data-testid=user-row-role]', "operator");
  await page.waitForFunction(async () => {
    const { users } = await (await fetch("/api/admin/users")).json();
    return users.find((u) => u.name === "newbie")?.role === "operator";
  });

  // A token, shown once with a copy button; it works, is listed without its secret, and is revoked.
  await page.fill("[data-testid=token-name]", "ci-bot");
  await page.selectOption("[data-testid=token-role]", "viewer");
  await page.click("[data-testid=token-create]");
  await page.waitForSelector("[data-testid=token-secret-value]");
  const token = await page.inputValue("[data-testid=token-secret-value]");
  assert.ok(token.length >= 20);
  await page.waitForSelector('[data-testid=token-row][data-token="ci-bot"][data-state="active"]');
  await snap(page, "admin-en-desktop");
  const withToken = (path) => fetch(server.url + path, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal((await withToken("/api/slots")).status, 200, "the new token reads");
  const listed = await page.evaluate(async () => JSON.stringify(await (await fetch("/api/admin/tokens")).json()));
  assert.ok(!listed.includes(token), "the token list holds no secret");
  await page.click("[data-testid=token-secret-done]");
  assert.ok(!(await page.content()).includes(token), "the secret is gone from the page once dismissed");
  await page.click('[data-testid=token-row][data-token="ci-bot"] [data-testid=token-revoke]');
  await page.click('[data-testid=token-row][data-token="ci-bot"] [data-testid=token-revoke-confirm]');
  await page.waitForSelector('[data-testid=token-row][data-token="ci-bot"][data-state="revoked"]');
  assert.equal((await withToken("/api/slots")).status, 401, "a revoked token is refused");

  // The new user signs in with the password shown once.
  const r = await fetch(`${server.url}/api/auth/login`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: "newbie", password }),
  });
  assert.equal(r.status, 200);
  assert.equal((await r.json()).subject.role, "operator");

  await snap(page, "admin-en-desktop-revoked");
  await setLang(page, "ko");
  await snap(page, "admin-ko-desktop");
  await page.setViewportSize(PHONE);
  await snap(page, "admin-ko-phone");
  await page.goto(appUrl(server, "/"));
  await page.waitForSelector("[data-testid=slot-card]");
  await snap(page, "header-ko-phone");
  await setLang(page, "en");
  await snap(page, "header-en-phone");
  await page.goto(appUrl(server, "/admin"));
  await page.waitForSelector("[data-testid=users-table]");
  await snap(page, "admin-en-phone");
  await page.setViewportSize(DESKTOP);
  await page.close();
});

test("the demo on loopback: first visit signed in once, sign-out offers Continue as demo-admin, no silent sign-in", async () => {
  const demo = new Server({ flags: serverFlags({ "demo-autologin": true }) });
  await demo.start();
  const b = await openBrowser();
  try {
    const page = await b.context.newPage();
    await page.goto(appUrl(demo, "/"));
    // A browser's first visit: the dashboard presses "Continue as demo-admin" itself.
    await page.waitForSelector('[data-testid=whoami][data-role="admin"]', { timeout: 15_000 });
    assert.equal(await page.textContent("[data-testid=whoami-name]"), "demo-admin");
    await waitLive(page);
    await page.waitForSelector("[data-testid=slot-card]");
    await snap(page, "demo-autologin");

    // The account page does not ask demo-admin for a password it has none of.
    await page.goto(appUrl(demo, "/account"));
    await page.waitForSelector("[data-testid=account-no-password]");
    assert.equal(await page.$("[data-testid=pw-current]"), null, "no current-password field for demo-admin");
    await snap(page, "demo-account");

    // Sign out: not a dead end; the page offers the demo's sign-in.
    await page.click("[data-testid=signout]");
    await page.waitForSelector("[data-testid=signin-demo]");
    await snap(page, "demo-signed-out");
    // A reload does not sign back in silently, and reads append nothing.
    const before = (await demo.api("GET", "/api/slots")).position;
    await page.reload();
    await page.waitForSelector("[data-testid=signin-demo]");
    assert.equal(await page.$("[data-testid=whoami]"), null, "a reload after sign-out signed in silently");
    const me = await page.evaluate(async () => {
      const out = [];
      for (let i = 0; i < 20; i++) {
        const r = await fetch("/api/auth/me");
        out.push(`${r.status} ${(await r.json()).signed_in}`);
      }
      return out;
    });
    // 200 "not signed in" (issue 27: no console error), never a sign-in.
    assert.deepEqual([...new Set(me)], ["200 false"], "cookieless reads of /api/auth/me say not signed in");
    assert.equal((await demo.api("GET", "/api/slots")).position, before, "the reload and 20 reads appended nothing");

    // One click signs in again, on the page that was open (the account page).
    await signInAsDemo(page);
    await page.waitForSelector("[data-testid=account-page]");
    await page.goto(appUrl(demo, "/"));
    await waitLive(page);
    await page.waitForSelector("[data-testid=slot-card]");
  } finally {
    await b.close();
    await demo.close();
  }
});
