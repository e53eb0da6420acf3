// Issue 27, the rest of items 8 and 9: the job history grouped by step,
// insights that answer a pool owner's three questions on a 390 px phone,
// and a first visit whose console stays clean (GET /api/auth/me answers
// "not signed in" with 200). Each in en and ko, on a desktop and a phone,
// with the axe run and a screenshot per page under artifacts/ (dash4-*).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, openPage, serverFlags, SIZES, WAYS } from "../lib/app.js";
import { expectNoSeriousViolations } from "../lib/a11y.js";

let server;
let browser;
const ME = "e2e-admin";

before(async () => {
  server = new Server({ flags: serverFlags({ "step-timeout": "45s", "offer-ttl": "5m" }) });
  prepareAuth(server, { name: ME, role: "admin" });
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

const open = (route, opts) => openPage(browser, server, route, { timeout: 30_000, ...opts });
const slots = async () => (await server.api("GET", "/api/slots")).slots;
const inHours = (h) => new Date(Date.now() + h * 3_600_000).toISOString();

/** done saves the screen, runs axe and checks a phone screen is no wider than 390 px. */
async function done(page, name, lang, size) {
  await shot(page, `dash4-${name}-${lang}-${size}`);
  await expectNoSeriousViolations(page, `${name} ${lang} ${size}`);
  if (size === "phone") {
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(wide <= SIZES.phone.width, `${name} ${lang}: ${wide} px wide on a 390 px phone`);
  }
  await page.close();
}

/** until asks cond (an API read) again at each frame of the server's live stream until it returns a value, or fails after ms. */
const until = (what, cond, ms = 120_000) => server.until(what, cond, ms);

let reset; // a reset that succeeded: { id, slot }

test("item 8: the job history is one row per step with outcome, attempts and a sub-second time, its events folded under it", async () => {
  const vacant = (await slots()).find((s) => s.lifecycle === "vacant" && !s.active_job);
  assert.ok(vacant, "a vacant slot to reset");
  await server.api("POST", `/api/slots/${vacant.name}/occupy`, { by: ME, until: inHours(2) });
  const { job_id: id } = await server.api("POST", `/api/slots/${vacant.name}/release`, { reason: "e2e: history by step" });
  reset = { id, slot: vacant.name };
  const events = await until("the reset to succeed", async () => {
    const j = await server.api("GET", `/api/jobs/${id}`);
    return j.state === "succeeded" && (await server.api("GET", `/api/jobs/${id}/events`)).events;
  });
  const stepStarts = events.filter((e) => e.type === "StepStarted").length;
  const steps = [...new Set(events.map((e) => e.data?.step).filter(Boolean))];
  assert.ok(stepStarts > steps.length, `the reset wrote ${stepStarts} StepStarted for ${steps.length} steps: not a test of grouping`);

  for (const [lang, size] of WAYS) {
    const page = await open(`/jobs/${id}`, { lang, size, selector: '[data-testid=job-page][data-state="succeeded"] [data-testid=history]' });
    // The history is folded under the timeline (issue 35): open it.
    await page.click("[data-testid=history] > summary");
    await page.waitForSelector("[data-testid=history-step]");
    const rows = await page.$$eval("[data-testid=timeline] > li", (els) => els.map((e) => e.getAttribute("data-step") ?? e.getAttribute("data-type")));
    // No top-level "Step started" card: each step once, in the order it ran; the job's own events stay rows.
    assert.ok(!rows.includes("StepStarted"), `rows ${rows}`);
    assert.deepEqual(
      rows.filter((r) => steps.includes(r)),
      steps,
      "one row per step, in the order the steps ran",
    );
    assert.equal(rows[0], "JobQueued");
    assert.equal(rows.at(-1), "JobSucceeded");
    assert.ok(rows.includes("JobClaimed"), `rows ${rows}`);
    // A list step holds all of its StepStarted events, folded.
    const many = await page.$$eval("[data-testid=history-step]", (els) =>
      els.map((e) => ({ step: e.dataset.step, outcome: e.dataset.outcome, n: e.querySelectorAll("li[data-type=StepStarted]").length, open: e.querySelector("details").open })),
    );
    assert.equal(many.reduce((n, g) => n + g.n, 0), stepStarts, "every StepStarted sits under its step");
    assert.ok(many.every((g) => g.outcome === "done" && !g.open), JSON.stringify(many));
    const biggest = many.reduce((a, b) => (b.n > a.n ? b : a));
    const row = page.locator(`[data-testid=history-step][data-step=${biggest.step}]`);
    const facts = await row.locator("[data-testid=history-step-facts]").first().textContent();
    assert.match(facts, lang === "ko" ? /시도 #1/ : /attempt #1/);
    // Sub-second precise: "took 259 ms" or "took 1.4s", never "took 0s".
    const took = await row.locator("[data-testid=history-step-took]").first().textContent();
    assert.match(took, lang === "ko" ? /^소요 (\d+밀리초|\d+(\.\d)?초|\d+분( \d+초)?)$/ : /^took (\d+ ms|\d+(\.\d)?s|\d+m( \d+s)?)$/, took);
    assert.doesNotMatch(took, /^(took|소요) 0(s|초)$/);
    // Expanding the step shows its events.
    await row.locator("summary").first().click();
    assert.equal(await row.locator("li[data-type=StepStarted]").first().isVisible(), true, "the step's events show once it is opened");
    await done(page, "history", lang, size);
  }
});

test("item 9: insights answer how full the pool was, how long people waited, how long each step takes, legibly on a phone", async () => {
  // A hand-over from the waitlist, so the wait chart has something to draw:
  // the pool full, the API token waits, one slot is released and reset,
  // the offer is accepted.
  for (const s of await slots()) {
    if (s.lifecycle === "vacant" && !s.active_job) await server.api("POST", `/api/slots/${s.name}/occupy`, { by: ME, until: inHours(3) });
  }
  const busy = await until("every slot to be occupied", async () => ((await slots()).every((s) => s.lifecycle !== "vacant") ? true : undefined), 60_000);
  assert.ok(busy);
  await server.api("POST", "/api/waitlist", { duration: "1h" });
  const mine = (await slots()).find((s) => s.lifecycle === "occupied" && s.occupant === ME && !s.active_job);
  await server.api("POST", `/api/slots/${mine.name}/release`, { reason: "e2e: hand over" });
  const entry = await until("the offer", async () => (await server.api("GET", "/api/waitlist")).entries?.find((e) => e.offer));
  await server.api("POST", `/api/waitlist/${entry.id}/accept`);
  const ins = await until("insights to count the hand-over", async () => {
    const x = await server.api("GET", "/api/insights?range=1d");
    return x.buckets.some((b) => b.handed_over > 0) && x;
  });
  assert.ok(ins.buckets.some((b) => b.covered_s > 0 && b.occupied_avg > 0), "the API answers time-weighted use");

  for (const [lang, size] of WAYS) {
    const page = await open("/insights", { lang, size, selector: "[data-testid=chart-slots]" });
    const qs = await page.$$eval("[data-testid=insights-page] h2", (els) => els.map((e) => e.textContent));
    assert.deepEqual(
      qs,
      lang === "ko"
        ? ["풀이 얼마나 찼나요?", "슬롯을 받기까지 얼마나 기다렸나요?", "단계마다 얼마나 걸리나요?"]
        : ["How full was the pool?", "How long did people wait for a slot?", "How long does each step take?"],
    );
    assert.match(await page.textContent("[data-testid=ins-now]"), lang === "ko" ? /^지금: 사용 중 \d+/ : /^Now: \d+ in use/);
    for (const chart of ["chart-slots", "chart-waitlist"]) {
      await page.waitForSelector(`[data-testid=${chart}]`);
      // The legend names exactly the series the chart draws.
      const drawn = await page.$$eval(`[data-testid=${chart}] [data-layer]`, (els) => [...new Set(els.map((e) => e.getAttribute("data-layer")))].sort());
      const legend = await page.$$eval(`[data-testid=${chart}-legend] [data-key]`, (els) => els.map((e) => e.getAttribute("data-key")).sort());
      assert.ok(drawn.length > 0, `${chart} draws nothing`);
      assert.deepEqual(legend, drawn, `${chart}: legend ${legend}, drawn ${drawn}`);
      // A text alternative, and no text inside the stretched SVG.
      assert.ok((await page.getAttribute(`[data-testid=${chart}]`, "aria-label")).length > 10);
      assert.equal(await page.$$eval(`[data-testid=${chart}] text`, (els) => els.length), 0);
    }
    // Axes labelled, every label legible (at least 12 px) and inside the screen.
    const labels = await page.$$eval(".ins-x span, .ins-y span, .ins-axis-title span, .ins-legend > span, .ins-step-nums", (els) =>
      els.map((e) => ({ text: e.textContent, px: parseFloat(getComputedStyle(e).fontSize), right: e.getBoundingClientRect().right })),
    );
    assert.ok(labels.some((l) => /slots|슬롯 수/.test(l.text)), "the use chart's axis is named");
    assert.ok(labels.some((l) => /wait|대기 시간/.test(l.text)), "the wait chart's axis is named");
    const small = labels.filter((l) => l.text && l.px < 12);
    assert.deepEqual(small, [], "labels under 12 px");
    const out = labels.filter((l) => l.right > SIZES[size].width + 0.5);
    assert.deepEqual(out, [], "labels past the screen's edge");
    // The wait chart: the hand-over, its median and p90 in the table.
    assert.match(await page.textContent("[data-testid=wait-summary]"), lang === "ko" ? /넘겨준 슬롯 [1-9]/ : /handed over from the waitlist: [1-9]/);
    await page.click("[data-testid=ins-wait] details.ins-table > summary");
    assert.ok((await page.$$("[data-testid=wait-table] tbody tr")).length >= 1);
    await page.click("[data-testid=ins-use] details.ins-table > summary");
    assert.ok((await page.$$("[data-testid=use-table] tbody tr")).length >= 1);
    // Time per step: the reset's steps with median and p90 in words.
    const reset = page.locator("[data-testid=steps-rows][data-kind=reset]");
    assert.match(await reset.textContent(), lang === "ko" ? /중앙값 .+ · 90백분위 .+ · \d+회/ : /median .+ · p90 .+ · \d+ runs?/);
    assert.equal(await reset.locator("li").last().getAttribute("data-step"), "job", "the whole job last");
    assert.doesNotMatch(await page.textContent("[data-testid=insights-page]"), /\dh0m0s/, "a Go duration reached the page");
    await done(page, "insights", lang, size);
  }
});

test("first visit: GET /api/auth/me answers 200 'not signed in' and the console stays clean", async () => {
  const fresh = await openBrowser();
  try {
    for (const [lang, size] of WAYS) {
      const page = await fresh.context.newPage();
      await page.setViewportSize(SIZES[size]);
      await page.addInitScript((l) => localStorage.setItem("slotkeeper.lang", l), lang);
      const errors = [];
      page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
      page.on("pageerror", (e) => errors.push(String(e)));
      const me = page.waitForResponse((r) => r.url().endsWith("/api/auth/me"));
      await page.goto(appUrl(server, "/"));
      const r = await me;
      assert.equal(r.status(), 200);
      assert.deepEqual(await r.json(), { signed_in: false, methods: ["local"] });
      assert.equal(r.headers()["cache-control"], "no-store");
      await page.waitForSelector("[data-testid=signin-page]");
      assert.deepEqual(errors, [], "console errors on a first visit");
      // Still nothing readable without signing in.
      assert.equal(await page.evaluate(async () => (await fetch("/api/slots")).status), 401);
      await done(page, "first-visit", lang, size);
    }
  } finally {
    await fresh.close();
  }
});
