// A Korean browser sees Korean without touching the switch; a Hangul name
// reaches the audit log; the plan confirmation keeps keyboard focus inside.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { appUrl, pickSlot, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;

before(async () => {
  server = new Server({ flags: serverFlags() });
  await server.start();
  browser = await openBrowser({ locale: "ko-KR" });
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

test("a Hangul name is accepted by the name box and recorded as the actor", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  const actorHeaders = [];
  page.on("request", (r) => {
    if (r.method() === "POST") actorHeaders.push(r.headers()["x-slotkeeper-actor"]);
  });
  await page.goto(appUrl(server, `/slots/${name}`));
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-page]");
  await page.fill("[data-testid=actor]", "김민준");
  await page.press("[data-testid=actor]", "Enter");
  assert.equal(await page.$("#actor-error"), null, "the name box accepts a Hangul name");
  assert.equal(await page.evaluate(() => localStorage.getItem("slotkeeper.actor")), "김민준");

  const before = (await server.api("GET", `/api/slots/${name}`)).revision;
  await page.click("[data-testid=extend]");
  await page.waitForFunction(
    ([n, rev]) => (window.__SLOTKEEPER__.snapshot().slots.find((s) => s.name === n)?.revision ?? 0) > rev,
    [name, before],
    { timeout: 15_000 },
  );
  assert.deepEqual(actorHeaders, ["%EA%B9%80%EB%AF%BC%EC%A4%80"], "sent percent-encoded UTF-8");
  const { entries } = await server.api("GET", `/api/audit?slot=${name}&actor=${encodeURIComponent("김민준")}`);
  assert.ok(entries?.length > 0, "the audit log names 김민준");
  assert.ok(entries.every((e) => e.actor === "김민준"));

  // A name the server would refuse is refused in the box, and the stored one stays.
  await page.fill("[data-testid=actor]", "김민준\u200b");
  await page.press("[data-testid=actor]", "Enter");
  await page.waitForSelector("#actor-error");
  assert.equal(await page.evaluate(() => localStorage.getItem("slotkeeper.actor")), "김민준");
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
