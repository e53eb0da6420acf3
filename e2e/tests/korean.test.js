// A Korean browser sees Korean without touching the switch (also on the
// sign-in page); the audit names the signed-in subject, not a header; the
// plan confirmation keeps keyboard focus inside.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, pickSlot, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;

before(async () => {
  server = new Server({ flags: serverFlags() });
  prepareAuth(server, { name: "minjun", role: "member" });
  await server.start();
  browser = await openBrowser({ locale: "ko-KR" });
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("a ko-KR browser opens the board in Korean with no switch pressed", async () => {
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, "/"));
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-card]");
  const seen = await page.evaluate(() => ({
    navigator: navigator.language,
    stored: localStorage.getItem("slotkeeper.lang"),
    htmlLang: document.documentElement.lang,
    nav: [...document.querySelectorAll("nav a")].map((a) => a.textContent),
    select: document.querySelector("[data-testid=lang]").value,
  }));
  assert.equal(seen.navigator, "ko-KR");
  assert.equal(seen.stored, null, "no language was chosen by hand");
  assert.equal(seen.select, "ko");
  assert.equal(seen.htmlLang, "ko", "the document says it is Korean");
  assert.ok(seen.nav.includes("슬롯"), `the navigation is in Korean: ${JSON.stringify(seen.nav)}`);
  await shot(page, "board-ko");
  await page.close();
});

test("the audit names the signed-in subject, never a header the page could set", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  // A forged actor header on every request of this page: the server must ignore it.
  await page.setExtraHTTPHeaders({ "X-Slotkeeper-Actor": "mallory" });
  const posts = [];
  page.on("request", (r) => {
    if (r.method() === "POST") posts.push(r.headers());
  });
  await page.goto(appUrl(server, `/slots/${name}`));
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-page]");
  // The header says who is signed in, in Korean.
  assert.equal(await page.textContent("[data-testid=whoami-name]"), "minjun");
  assert.equal(await page.textContent("[data-testid=whoami-role]"), "구성원");
  assert.equal(await page.textContent("[data-testid=signout]"), "로그아웃");
  // A member sees no teardown or promote on their own slot.
  assert.equal(await page.$("[data-testid=teardown]"), null);
  assert.equal(await page.$("[data-testid=promote]"), null);

  const before = (await server.api("GET", `/api/slots/${name}`)).revision;
  await page.click("[data-testid=extend]");
  await page.waitForFunction(
    ([n, rev]) => (window.__SLOTKEEPER__.snapshot().slots.find((s) => s.name === n)?.revision ?? 0) > rev,
    [name, before],
    { timeout: 15_000 },
  );
  assert.equal(posts.length, 1);
  assert.equal(posts[0]["content-type"], "application/json");
  assert.ok(posts[0]["x-csrf-token"], "the command carries the CSRF token");
  const { entries } = await server.api("GET", `/api/audit?slot=${name}&kind=OccupancyExtended`);
  assert.ok(entries?.length > 0, "the extend is in the audit log");
  assert.equal(entries[entries.length - 1].actor, "minjun", "recorded as the signed-in subject");
  const forged = await server.api("GET", `/api/audit?actor=mallory`);
  assert.deepEqual(forged.entries ?? [], [], "the forged header named nobody");
  await page.close();
});

test("the plan confirmation is modal: Tab and Shift+Tab stay inside, Escape closes, focus returns", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  await page.goto(appUrl(server, `/slots/${name}`));
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-page]");
  await page.focus("[data-testid=release]");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=plan-steps] li");
  await page.waitForSelector("[data-testid=confirm]:not([disabled])");
  const where = () =>
    page.evaluate(() => {
      const a = document.activeElement;
      const d = document.querySelector("[data-testid=confirm-plan]");
      return { inside: !!d && d.contains(a), id: a?.getAttribute("data-testid") ?? a?.textContent ?? a?.tagName };
    });
  assert.ok(await page.$eval("[data-testid=confirm-plan]", (d) => d.tagName === "DIALOG" && d.matches(":modal")), "a modal <dialog>");
  assert.equal((await where()).id, "취소", "Cancel has the focus");
  await shot(page, "confirm-plan-ko");
  const forward = [];
  for (let i = 0; i < 4; i++) {
    await page.keyboard.press("Tab");
    forward.push(await where());
  }
  assert.deepEqual(forward.map((w) => w.id), ["confirm", "취소", "confirm", "취소"], "Tab cycles inside");
  const backward = [];
  for (let i = 0; i < 2; i++) {
    await page.keyboard.press("Shift+Tab");
    backward.push(await where());
  }
  assert.deepEqual(backward.map((w) => w.id), ["confirm", "취소"], "Shift+Tab cycles inside");
  await page.keyboard.press("Escape");
  await page.waitForSelector("[data-testid=confirm-plan]", { state: "detached" });
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("data-testid")), "release", "focus is back on the opener");
  const job = (await server.api("GET", `/api/slots/${name}`)).active_job;
  assert.ok(!job, `nothing was started (${JSON.stringify(job)})`);
  await page.close();
});
