// Stop the server: the stale banner shows within the watchdog time. Start it
// again on the same data: the banner clears and the page missed nothing.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { debugState, openBrowser, shot } from "../lib/browser.js";
import { CutProxy } from "../lib/proxy.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { HB, appUrl, pickSlot, readClaims, readSteps, recordClaims, recordSteps, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;

before(async () => {
  server = new Server({ flags: serverFlags({ grace: "6s" }) });
  prepareAuth(server);
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
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
    // The watchdog ticks on a browser timer, which a loaded machine delays:
    // the slack is generous; what tells the watchdog's doing is the state
    // it sets (stale), and that it is not before two heartbeats.
    await page.waitForSelector("[data-testid=connection-banner]", { timeout: 2 * HB + 15_000 });
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
  // Closed whatever happens: a listening proxy left behind keeps the test process alive.
  try {
    const name = await pickSlot(server);
    const accepted = await server.api("POST", `/api/slots/${name}/release`, { reason: "e2e: released by the test through the API" });
    await page.goto(appUrl(proxy, `/jobs/${accepted.job_id}/wait`));
    await waitLive(page);
    await page.waitForSelector("[data-testid=wait-view]");
    await recordSteps(page);
    // Cut the tab's connection; the server and its jobs keep running.
    await proxy.cut();
    try {
      await page.waitForSelector("[data-testid=connection-banner]", { timeout: 2 * HB + 15_000 });
      // The job runs to its end on the server while the tab is cut off
      // (followed on the server's own stream, not the tab's).
      const job = await server.until(
        "the job to end",
        async () => {
          const j = await server.api("GET", `/api/jobs/${accepted.job_id}`);
          return ["succeeded", "failed", "timed_out", "cancelled", "abandoned"].includes(j.state) && j;
        },
        120_000,
      );
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
  } finally {
    await proxy.close();
  }
});

test("stale banner within the watchdog time, cleared after a restart with no missed steps", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  // A release in its grace period: its steps will run after the restart.
  const accepted = await server.api("POST", `/api/slots/${name}/release`, { reason: "e2e: released by the test through the API" });
  await page.goto(appUrl(server, `/jobs/${accepted.job_id}/wait`));
  await waitLive(page);
  await page.waitForSelector("[data-testid=wait-view]");
  await recordSteps(page);
  await recordClaims(page);
  assert.equal(await page.$("[data-testid=connection-banner]"), null);

  const t0 = Date.now();
  const downAt = await page.evaluate(() => performance.now());
  await server.stop();
  // The engine claims a job only once its not_before has passed: if the
  // process had exited by then, no step ran before the stop.
  const stoppedInGrace = Date.now() < Date.parse(accepted.not_before);
  // Within the watchdog's time, with a loaded machine's slack (1.5 s was
  // not always enough, issue 36 item 7); still far below the reconnect
  // backoff's 30 s, the time a page relying on it alone would take.
  await page.waitForSelector("[data-testid=connection-banner]", { timeout: 2 * HB + 10_000 });
  const shownAfter = Date.now() - t0;
  console.log(`# banner shown ${shownAfter} ms after the server stopped (watchdog ${2 * HB} ms + one tick)`);
  assert.ok(shownAfter <= 2 * HB + 10_000, `banner within the watchdog time (${shownAfter} ms)`);
  const indicator = await page.getAttribute("[data-testid=live-indicator]", "data-status");
  assert.notEqual(indicator, "live");
  // Nothing is claimed while the page cannot verify.
  const phase = await page.getAttribute("[data-testid=wait-view]", "data-phase");
  assert.ok(phase === "unknown", `wait view says it cannot verify (phase ${phase})`);
  await shot(page, "stale-banner");

  await server.start();
  // Sessions are events (stream auth-sessions): the restart keeps the tab
  // signed in, and the stream reopens from the page's last position.
  await page.waitForSelector("[data-testid=connection-banner]", { state: "detached", timeout: 30_000 });
  await waitLive(page);
  await page.waitForSelector("[data-testid=wait-view]");
  assert.equal(await page.$("[data-testid=signin-page]"), null, "the restart kept the tab signed in");
  assert.ok(page.url().includes(`#/jobs/${accepted.job_id}/wait`), "the route is kept");
  await shot(page, "restart-still-signed-in");
  const upAt = await page.evaluate(() => performance.now());
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
  const { events } = await server.api("GET", `/api/jobs/${accepted.job_id}/events`);
  const types = (events ?? []).map((e) => e.type);
  const succeeded = types.includes("JobSucceeded");
  // The simulators keep their state under <data>/sim, so the restarted
  // server finds the demo world the reset works on. A job whose grace had
  // not ended when the process exited runs wholly after the restart and must
  // succeed. Only if the stop came after the grace (a slow machine) may the
  // shutdown have fenced it mid-step (timed_out, for a person to resume):
  // then either ending is accepted, and what is checked is that the page
  // tells the truth.
  console.log(`# after the restart the job ended ${apiJob.state}${apiJob.reason ? ` (${apiJob.reason})` : ""}; stopped within the grace: ${stoppedInGrace}; events: ${types.join(", ")}`);
  assert.equal(apiJob.state === "succeeded", succeeded, "the read model's state agrees with the event log");
  if (stoppedInGrace) assert.equal(apiJob.state, "succeeded", `a job that ran wholly after the restart ended ${apiJob.state}: ${apiJob.reason ?? ""}`);
  if (succeeded) {
    await page.waitForURL(new RegExp(`#/slots/${name}$`), { timeout: 10_000 });
  } else {
    await page.waitForSelector('[data-testid=wait-view][data-phase="failed"]', { timeout: 10_000 });
    await page.waitForSelector("[data-testid=wait-failed] [data-testid=timeline-link]");
    await shot(page, "restart-failed");
  }

  // No claim of success unless the log holds JobSucceeded: the wait view
  // never said "succeeded" and never left for the slot page.
  const claims = await readClaims(page);
  const claimedSuccess = claims.phases.some((p) => p.phase === "succeeded");
  const leftWait = claims.routes.some((r) => !r.startsWith(`#/jobs/${accepted.job_id}/wait`));
  if (!succeeded) {
    assert.ok(!claimedSuccess, `no success shown without JobSucceeded (phases ${JSON.stringify(claims.phases.map((p) => p.phase))})`);
    assert.ok(!leftWait, `stayed on the wait view (routes ${JSON.stringify(claims.routes)})`);
    assert.ok(/\/wait$/.test(page.url()));
  } else {
    assert.ok(claimedSuccess || leftWait, "success was shown");
    assert.deepEqual(claims.routes.filter((r) => !r.startsWith(`#/jobs/${accepted.job_id}/wait`)), [`#/slots/${name}`], "it moved only to the slot page");
  }
  // While the server was down the page claimed no ending at all, and said
  // "cannot verify" (also checked at that moment above).
  const whileDown = claims.phases.filter((p) => p.t >= downAt && p.t <= upAt).map((p) => p.phase);
  assert.ok(whileDown.includes("unknown"), `"cannot verify" shown while down (${JSON.stringify(whileDown)})`);
  assert.ok(!whileDown.some((p) => p === "succeeded" || p === "failed"), `no ending claimed while down (${JSON.stringify(whileDown)})`);

  // No missed steps: every step the read model shows done was shown done
  // live, and each step's last state on the page is its state in the read
  // model (a failed step shown failed or uncertain, not skipped).
  const log = await readSteps(page);
  for (const s of apiJob.steps ?? []) {
    const shown = log.filter((e) => e.step === s.name).map((e) => e.state);
    if (s.state === "done") assert.ok(shown.includes("done"), `step ${s.name} was shown done (${JSON.stringify(shown)})`);
    const want = s.name === apiJob.uncertain_step && s.state !== "done" ? "uncertain" : s.state;
    assert.equal(shown[shown.length - 1], want, `step ${s.name} last shown ${shown[shown.length - 1]}, read model ${want}`);
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
