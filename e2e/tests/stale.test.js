// Stop the server: the stale banner shows within the watchdog time. Start it
// again on the same data: the banner clears and the page missed nothing.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { debugState, openBrowser, shot } from "../lib/browser.js";
import { CutProxy } from "../lib/proxy.js";
import { Server } from "../lib/server.js";
import { HB, appUrl, pickSlot, readSteps, recordSteps, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;

before(async () => {
  server = new Server({ flags: serverFlags({ grace: "6s" }) });
  await server.start();
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("a silent (half-open) stream is caught by the watchdog after two heartbeats", async () => {
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, "/"));
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-card]");
  // SIGSTOP keeps the TCP connection open but sends nothing: no error event
  // ever fires, only the watchdog can notice.
  const t0 = Date.now();
  server.pause();
  try {
    await page.waitForSelector("[data-testid=connection-banner]", { timeout: 2 * HB + 3_000 });
    const shownAfter = Date.now() - t0;
    console.log(`# silent stream marked stale ${shownAfter} ms after the server froze (2 heartbeats = ${2 * HB} ms, tick 1000 ms)`);
    assert.ok(shownAfter >= 2 * HB - 1_000, `not before two heartbeats were missed (${shownAfter} ms)`);
    assert.equal(await page.getAttribute("[data-testid=live-indicator]", "data-status"), "stale");
    await shot(page, "stale-silent");
  } finally {
    server.resume();
  }
  await page.waitForSelector("[data-testid=connection-banner]", { state: "detached", timeout: 30_000 });
  await waitLive(page);
  await page.close();
});

test("a tab that loses the network while a job runs misses no step when it comes back", async () => {
  const page = await browser.context.newPage();
  const proxy = await new CutProxy(server.port).start();
  const name = await pickSlot(server);
  const accepted = await server.api("POST", `/api/slots/${name}/release`);
  await page.goto(appUrl(proxy, `/jobs/${accepted.job_id}/wait`));
  await waitLive(page);
  await page.waitForSelector("[data-testid=wait-view]");
  await recordSteps(page);
  // Cut the tab's connection; the server and its jobs keep running.
  await proxy.cut();
  try {
    await page.waitForSelector("[data-testid=connection-banner]", { timeout: 2 * HB + 3_000 });
    // The job runs to its end on the server while the tab is cut off.
    const deadline = Date.now() + 60_000;
    let job;
    for (;;) {
      job = await server.api("GET", `/api/jobs/${accepted.job_id}`);
      if (["succeeded", "failed", "timed_out", "cancelled", "abandoned"].includes(job.state)) break;
      assert.ok(Date.now() < deadline, `job still ${job.state} after 60 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(job.state, "succeeded", `the job ended ${job.state}: ${job.reason ?? ""}`);
    // Offline, the page must not have claimed anything.
    assert.notEqual(await page.getAttribute("[data-testid=wait-view]", "data-phase"), "succeeded");
    assert.ok(/\/wait$/.test(page.url()), "still on the wait view while offline");
  } finally {
    await proxy.restore();
  }
  await page.waitForSelector("[data-testid=connection-banner]", { state: "detached", timeout: 30_000 });
  await page.waitForURL(new RegExp(`#/slots/${name}$`), { timeout: 30_000 });
  const apiJob = await server.api("GET", `/api/jobs/${accepted.job_id}`);
  const log = await readSteps(page);
  for (const s of apiJob.steps) {
    assert.ok(log.some((e) => e.step === s.name && e.state === "done"), `step ${s.name} was shown done after the reconnect`);
  }
  const st = await debugState(page);
  assert.equal(st.jobs.find((j) => j.id === accepted.job_id).revision, apiJob.revision, "the page caught up exactly");
  await page.close();
  await proxy.close();
});

test("stale banner within the watchdog time, cleared after a restart with no missed steps", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  // A release in its grace period: its steps will run after the restart.
  const accepted = await server.api("POST", `/api/slots/${name}/release`);
  await page.goto(appUrl(server, `/jobs/${accepted.job_id}/wait`));
  await waitLive(page);
  await page.waitForSelector("[data-testid=wait-view]");
  await recordSteps(page);
  assert.equal(await page.$("[data-testid=connection-banner]"), null);

  const t0 = Date.now();
  await server.stop();
  await page.waitForSelector("[data-testid=connection-banner]", { timeout: 2 * HB + 2_000 });
  const shownAfter = Date.now() - t0;
  console.log(`# banner shown ${shownAfter} ms after the server stopped (watchdog ${2 * HB} ms + one tick)`);
  assert.ok(shownAfter <= 2 * HB + 1_000 + 500, `banner within the watchdog time (${shownAfter} ms)`);
  const indicator = await page.getAttribute("[data-testid=live-indicator]", "data-status");
  assert.notEqual(indicator, "live");
  // Nothing is claimed while the page cannot verify.
  const phase = await page.getAttribute("[data-testid=wait-view]", "data-phase");
  assert.ok(phase === "unknown", `wait view says it cannot verify (phase ${phase})`);
  await shot(page, "stale-banner");

  await server.start();
  await page.waitForSelector("[data-testid=connection-banner]", { state: "detached", timeout: 30_000 });
  await waitLive(page);
  // Follow the job to its end through the page's own store (no API polling).
  await page.waitForFunction(
    (id) => {
      const j = window.__SLOTKEEPER__.snapshot().jobs.find((x) => x.id === id);
      return j && ["succeeded", "failed", "timed_out", "cancelled", "abandoned"].includes(j.state);
    },
    accepted.job_id,
    { timeout: 90_000 },
  );
  const apiJob = await server.api("GET", `/api/jobs/${accepted.job_id}`);
  console.log(`# after the restart the job ended ${apiJob.state}${apiJob.reason ? ` (${apiJob.reason})` : ""}`);
  if (apiJob.state === "succeeded") {
    await page.waitForURL(new RegExp(`#/slots/${name}$`), { timeout: 10_000 });
  } else {
    await page.waitForSelector('[data-testid=wait-view][data-phase="failed"]', { timeout: 10_000 });
  }

  // No missed steps: every step the read model shows done was shown done live.
  const log = await readSteps(page);
  for (const s of apiJob.steps ?? []) {
    if (s.state === "done") assert.ok(log.some((e) => e.step === s.name && e.state === "done"), `step ${s.name} was shown done`);
  }
  // No missed changes: the page's store equals the read model, revision for revision.
  const st = await debugState(page);
  const mine = st.jobs.find((j) => j.id === accepted.job_id);
  assert.equal(mine.revision, apiJob.revision);
  const { slots } = await server.api("GET", "/api/slots");
  for (const s of slots) {
    const have = st.slots.find((x) => x.name === s.name);
    assert.ok(have, `slot ${s.name} is on the page`);
    assert.equal(have.revision, s.revision, `slot ${s.name} revision`);
  }
  await page.close();
});
