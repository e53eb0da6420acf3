// Release a slot from the dashboard and watch the steps arrive live; then
// inject a hang and see an honest failure that links to the timeline.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { debugState, openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, jobIdFromUrl, pickSlot, readSteps, recordSteps, serverFlags, waitLive } from "../lib/app.js";

const RESET_STEPS = ["delete_db", "delete_env_vars", "delete_volumes", "force_push_template", "vacate"];
let server;
let browser;

before(async () => {
  server = new Server({ flags: serverFlags() });
  prepareAuth(server);
  await server.start();
  if (server.skippedFlags.length) console.log(`# serve lacks flags: ${server.skippedFlags.join(", ")}`);
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("release a slot and watch the steps arrive live", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  const jobGets = [];
  page.on("request", (r) => {
    if (/\/api\/jobs\/[^/]+$/.test(new URL(r.url()).pathname)) jobGets.push(r.url());
  });
  await page.goto(appUrl(server, "/"));
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-card]");
  await shot(page, "board");

  await page.goto(appUrl(server, `/slots/${name}`));
  await page.waitForSelector("[data-testid=slot-page]");
  await shot(page, "slot-page");
  await page.click("[data-testid=release]");
  await page.waitForSelector("[data-testid=plan-steps] li");
  const planned = await page.$$eval("[data-testid=plan-steps] li", (els) => els.length);
  assert.ok(planned >= 3, `the plan lists the steps (got ${planned})`);
  await shot(page, "confirm-plan");
  await page.click("[data-testid=confirm]");
  await page.waitForURL(/#\/jobs\/[^/]+\/wait/);
  const id = jobIdFromUrl(page.url());
  await page.waitForSelector("[data-testid=wait-view]");
  await recordSteps(page);
  const phase0 = await page.getAttribute("[data-testid=wait-view]", "data-phase");
  if (phase0 === "grace") await shot(page, "wait-grace");
  await page.waitForSelector('[data-testid=wait-view][data-phase="running"]', { timeout: 30_000 });
  await shot(page, "wait-running");

  // Success moves to the slot page by itself, and only then.
  await page.waitForURL(new RegExp(`#/slots/${name}$`), { timeout: 60_000 });
  const log = await readSteps(page);
  const done = log.filter((e) => e.state === "done").map((e) => e.step);
  for (const s of RESET_STEPS) assert.ok(done.includes(s), `step ${s} was shown done (log: ${JSON.stringify(log)})`);
  const running = log.filter((e) => e.state === "running");
  assert.ok(running.length >= 1, "at least one step was seen running before it was done");
  const doneTimes = log.filter((e) => e.state === "done").map((e) => e.t);
  assert.ok(Math.max(...doneTimes) > Math.min(...doneTimes), "steps arrived one by one, not in one render");
  console.log(`# steps seen live: ${log.map((e) => `${e.step}:${e.state}@${Math.round(e.t)}`).join(" ")}`);

  // The log agrees: the job really succeeded.
  const { events } = await server.api("GET", `/api/jobs/${id}/events`);
  assert.ok(events.some((e) => e.type === "JobSucceeded"), "JobSucceeded is in the log");
  // Live, not polled: the job was looked up once (plus once per reconnect at most).
  assert.ok(jobGets.length <= 2, `GET /api/jobs/${id} was called ${jobGets.length} times`);
  const st = await debugState(page);
  const j = st.jobs.find((x) => x.id === id);
  const api = await server.api("GET", `/api/jobs/${id}`);
  assert.equal(j.revision, api.revision, "the page holds the job's latest revision");
  await page.close();
});

test("a hung provider call ends in an honest failure that links to the timeline", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  const fault = await server.api("POST", "/api/sim/faults", { endpoint: "coolify.ListStorages", hang: true });
  try {
    await page.goto(appUrl(server, `/slots/${name}`));
    await waitLive(page);
    await page.click("[data-testid=release]");
    await page.waitForSelector("[data-testid=plan-steps] li");
    await page.click("[data-testid=confirm]");
    await page.waitForURL(/#\/jobs\/[^/]+\/wait/);
    const id = jobIdFromUrl(page.url());
    await page.waitForSelector('[data-testid=wait-view][data-phase="failed"]', { timeout: 90_000 });
    const text = await page.textContent("[data-testid=wait-failed]");
    assert.match(text, /Done: .*Delete database/, "names the completed steps");
    assert.match(text, /Delete env vars/);
    assert.doesNotMatch(text, /finished: every step/i);
    assert.ok(!/#\/slots\//.test(page.url()), "stayed on the wait view");
    await shot(page, "wait-failed");
    const job = await server.api("GET", `/api/jobs/${id}`);
    assert.notEqual(job.state, "succeeded");

    await page.click("[data-testid=timeline-link]");
    await page.waitForSelector("[data-testid=job-timeline] [data-testid=tl-row]");
    await page.waitForSelector("[data-testid=timeline] li", { state: "attached" });
    const types = await page.$$eval("[data-testid=timeline] li", (els) => els.map((e) => e.getAttribute("data-type")));
    assert.ok(types.includes("StepStarted"), "the timeline shows the steps");
    assert.ok(types.some((t) => t === "JobTimedOut" || t === "JobFailed"), `the timeline shows the end (${types.join(",")})`);
    await shot(page, "job-timeline");
  } finally {
    await server.api("DELETE", `/api/sim/faults/${fault.id}`).catch(() => undefined);
    await page.close();
  }
});

test("keyboard only: reach a slot, open the release confirmation, close it with Escape", async () => {
  // The board puts slots that need attention first, then the rest in
  // natural order: the first card in the page is the one Tab reaches. It
  // must be an occupied slot with no job, so that it offers a release.
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, "/"));
  await waitLive(page);
  await page.waitForSelector(".card-title");
  const firstCard = () => page.evaluate(() => document.querySelector(".card-title")?.textContent ?? "");
  const { slots } = await server.api("GET", "/api/slots");
  const name = await firstCard();
  const slot = slots.find((s) => s.name === name);
  assert.ok(slot && !slot.active_job, `${name} is not busy`);
  if (slot.lifecycle === "vacant") {
    // Three hours: not "deadline within the hour", so it keeps its place.
    await server.api("POST", `/api/slots/${name}/occupy`, { until: new Date(Date.now() + 3 * 3_600_000).toISOString() });
  }
  await page.waitForSelector(`[data-slot="${name}"] .lc-occupied`);
  assert.equal(await firstCard(), name, "occupying the first card kept it first");
  // The first Tab lands on the skip link; follow it to the content.
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.className), "skip");
  let reached = "";
  for (let i = 0; i < 30 && !reached; i++) {
    await page.keyboard.press("Tab");
    reached = await page.evaluate(() => (document.activeElement?.classList.contains("card-title") ? document.activeElement.textContent : ""));
  }
  assert.equal(reached, name, "the first slot card is reachable with Tab");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=slot-page]");
  await page.focus("[data-testid=release]");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=confirm-plan]");
  // Focus starts on Cancel, the safe choice.
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Cancel");
  await page.keyboard.press("Escape");
  await page.waitForSelector("[data-testid=confirm-plan]", { state: "detached" });
  const { jobs } = await server.api("GET", `/api/slots/${name}/jobs?kind=reset`);
  assert.ok(!(jobs ?? []).some((j) => !["succeeded", "failed", "timed_out", "cancelled", "abandoned"].includes(j.state)), "Escape queued nothing");
  await page.close();
});

test("audit and remaining-resources pages render from the log", async () => {
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, "/audit"));
  await waitLive(page);
  await page.waitForSelector("[data-testid=audit-table] tbody tr");
  await shot(page, "audit");
  await page.goto(appUrl(server, "/remaining"));
  await page.waitForSelector("h1#remaining-title");
  await shot(page, "remaining");
  // Korean, switched in the header and kept across a reload.
  await page.goto(appUrl(server, "/"));
  await page.selectOption("[data-testid=lang]", "ko");
  await page.reload();
  await page.waitForSelector("[data-testid=slot-card]");
  assert.equal(await page.textContent("#board-title"), "슬롯");
  await shot(page, "board-ko");
  await page.selectOption("[data-testid=lang]", "en");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(appUrl(server, "/"));
  await page.waitForSelector("[data-testid=slot-card]");
  await shot(page, "board-phone");
  await page.close();
});
