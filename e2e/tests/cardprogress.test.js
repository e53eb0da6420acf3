// Issue 12 item 3: "board cards freeze on a job's first state". A slot's
// revision does not move on its jobs' events, so a page that kept the view
// with the highest revision showed "Reset · Queued · step 0 of 0" for the
// whole job. Here a board card must follow a reset step by step, without a
// reload: queued → running, step k of n for several k → no active job, the
// slot vacant again.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { debugState, openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, pickSlot, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;

before(async () => {
  // A roomy step timeout: the git push of the template takes seconds on a
  // busy machine, and this test is about the card, not about timeouts.
  server = new Server({ flags: serverFlags({ "step-timeout": "30s" }) });
  prepareAuth(server);
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("a board card follows a reset step by step without a reload", async () => {
  const page = await browser.context.newPage();
  const name = await pickSlot(server);
  // Every Coolify call takes 250 ms, so each step stays on screen for a
  // moment (well inside the 3 s step timeout); the git steps are unchanged.
  const fault = await server.api("POST", "/api/sim/faults", { server: "coolify", latency_ms: 250 });
  try {
    await page.goto(appUrl(server, "/"));
    await waitLive(page);
    const card = `[data-testid=slot-card][data-slot="${name}"]`;
    await page.waitForSelector(card);
    // Record every state the card shows, as the DOM shows it, and mark the
    // document so a reload would be noticed.
    await page.evaluate((sel) => {
      window.__noReload = true;
      const log = [];
      window.__cardLog = log;
      let last = "";
      const scan = () => {
        const c = document.querySelector(sel);
        const j = c?.querySelector("[data-testid=card-job]");
        const e = {
          lifecycle: c?.querySelector("[data-testid=card-lifecycle]")?.className.replace(/.*lc-/, "") ?? "",
          state: j?.getAttribute("data-job-state") ?? "",
          done: Number(j?.getAttribute("data-steps-done") ?? -1),
          total: Number(j?.getAttribute("data-steps-total") ?? -1),
          text: j?.textContent ?? "",
        };
        const k = JSON.stringify(e);
        if (k !== last) {
          last = k;
          log.push({ ...e, t: performance.now() });
        }
      };
      new MutationObserver(scan).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
      scan();
    }, card);

    const accepted = await server.api("POST", `/api/slots/${name}/release`, { reason: "e2e: watch the card" });
    const total = accepted.steps.length;
    // Running, somewhere in the middle of the job: shot it.
    await page.waitForSelector(`${card} [data-testid=card-job][data-job-state=running][data-steps-done="1"]`, { timeout: 30_000 });
    await shot(page, "card-progress-running");
    // The job ends: the card drops the job and shows the slot vacant again.
    await page
      .waitForFunction(
        (sel) => {
          const c = document.querySelector(sel);
          return c && !c.querySelector("[data-testid=card-job]") && c.classList.contains("lc-vacant");
        },
        card,
        { timeout: 60_000 },
      )
      .catch(async (err) => {
        const job = await server.api("GET", `/api/jobs/${accepted.job_id}`);
        console.log(`# job: ${JSON.stringify(job)}`);
        console.log(`# card log: ${JSON.stringify(await page.evaluate(() => window.__cardLog))}`);
        throw err;
      });
    await shot(page, "card-progress-done");

    const log = await page.evaluate(() => window.__cardLog);
    console.log(`# card states: ${log.map((e) => `${e.lifecycle}/${e.state || "-"}:${e.done}/${e.total}`).join(" ")}`);
    assert.equal(await page.evaluate(() => window.__noReload), true, "the page was not reloaded");
    const jobStates = log.filter((e) => e.state !== "");
    assert.ok(jobStates.some((e) => e.state === "queued"), "the card showed the job queued");
    const running = jobStates.filter((e) => e.state === "running");
    assert.ok(running.length > 0, `the card showed the job running (log: ${JSON.stringify(log)})`);
    for (const e of running) assert.equal(e.total, total, `a running card counts the plan's ${total} steps, got "${e.text}"`);
    const counts = [...new Set(running.map((e) => e.done))];
    assert.ok(counts.length >= 3, `the card showed at least three step counts while running, got ${JSON.stringify(counts)}`);
    for (let i = 1; i < jobStates.length; i++) {
      assert.ok(jobStates[i].done >= jobStates[i - 1].done, `step counts never go back: ${JSON.stringify(jobStates)}`);
    }
    assert.ok(running.some((e) => e.done === total - 1), "the card reached the last step");

    // The log backs the card: the job succeeded, and the page's slot view is
    // the read model's (same position).
    const { events } = await server.api("GET", `/api/jobs/${accepted.job_id}/events`);
    assert.ok(events.some((e) => e.type === "JobSucceeded"), "JobSucceeded is in the log");
    const api = await server.api("GET", `/api/slots/${name}`);
    const mine = (await debugState(page)).slots.find((s) => s.name === name);
    assert.equal(mine.position, api.position, "the page holds the slot's latest view");
    assert.equal(mine.lifecycle, api.lifecycle);
  } finally {
    await server.api("DELETE", `/api/sim/faults/${fault.id}`).catch(() => undefined);
    await page.close();
  }
});
