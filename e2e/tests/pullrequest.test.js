// Issue 34 on the dashboard: a pull request opened from the Simulator page
// (the simulated Bitbucket's delivery, signed by the demo server's own
// secret) takes a slot; the board and the slot page show the PR and the
// commit it runs, its pr_deploy job page reads well; merging it from the
// Simulator page releases the slot.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;
// PR_SHOTS=<dir>: also save the pages at 1440 and 390 px in both languages there.
const SHOTS = process.env.PR_SHOTS;

before(async () => {
  server = new Server({ flags: serverFlags() });
  prepareAuth(server);
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function shots(page, route, name, selector) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  for (const lang of ["en", "ko"]) {
    for (const width of [1440, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.evaluate((l) => localStorage.setItem("slotkeeper.lang", l), lang);
      await page.goto(appUrl(server, route));
      await page.reload();
      await waitLive(page);
      await page.waitForSelector(selector, { timeout: 15_000 });
      await page.screenshot({ path: join(SHOTS, `${name}-${lang}-${width}.png`), fullPage: true });
    }
  }
  await page.evaluate(() => localStorage.setItem("slotkeeper.lang", "en"));
  await page.setViewportSize({ width: 1366, height: 900 });
  await page.reload(); // the language is read at load: hash routes keep the page
}

test("open a PR from the Simulator page, see it take a slot, merge it and see the slot released", async () => {
  const page = await browser.context.newPage();
  await page.goto(appUrl(server, "/simulator"));
  await waitLive(page);
  await page.waitForSelector("[data-testid=sim-prs]");
  await page.fill("[data-testid=prsim-branch]", "feature/e2e-checkout");
  await page.click("[data-testid=prsim-open]");
  await page.waitForSelector('[data-testid=prsim-outcome][data-result="accepted"]', { timeout: 15_000 });

  // The driver occupies a free slot for the PR; the page learns it from the slot's view.
  const row = await page.waitForSelector("[data-testid=prsim-pr][data-slot]", { timeout: 30_000 });
  const slot = await row.getAttribute("data-slot");
  const pr = await row.getAttribute("data-pr");
  assert.match(pr, /^DEMO\/webshop#\d+$/);
  await shot(page, "pr-sim-opened");

  // The board's card shows the PR: title, author, branch, link.
  await page.goto(appUrl(server, "/"));
  await waitLive(page);
  const card = `[data-testid=slot-card][data-slot="${slot}"]`;
  await page.waitForSelector(`${card} [data-testid=slot-pr][data-pr="${pr}"]`, { timeout: 15_000 });
  const cardText = await page.textContent(`${card} [data-testid=slot-pr]`);
  assert.match(cardText, /Change feature\/e2e-checkout/, "the PR's title");
  assert.match(cardText, /Dana Developer/, "its author");
  assert.match(cardText, /feature\/e2e-checkout/, "its branch");
  const href = await page.getAttribute(`${card} [data-testid=slot-pr-link]`, "href");
  assert.match(href, /\/projects\/DEMO\/repos\/webshop\/pull-requests\/\d+$/);

  // The slot page: the PR, its push deployed (the job's page linked), and the commit it runs.
  await page.goto(appUrl(server, `/slots/${slot}`));
  await page.waitForSelector("[data-testid=slot-page] [data-testid=slot-pr]");
  const push = await page.waitForSelector("[data-testid=pr-push]", { timeout: 30_000 });
  const head = await push.getAttribute("data-head");
  assert.match(head, /^[0-9a-f]{40}$/);
  const runs = await page.waitForSelector(`[data-testid=slot-page] [data-testid=slot-pr-commit][data-runs="${head}"]`, { timeout: 60_000 });
  assert.match(await runs.textContent(), new RegExp(head.slice(0, 12)));
  const api = await server.api("GET", `/api/slots/${slot}`);
  assert.equal(api.pull_request.head, head, "the read model's PR is at the deployed head");
  assert.equal(api.occupant_id, "bitbucket:dana", "occupied for the PR's author");
  await shots(page, `/slots/${slot}`, "slot", `[data-testid=slot-pr-commit][data-runs="${head}"]`);
  await shots(page, "/", "board", `${card} [data-testid=slot-pr]`);

  // The pr_deploy job's page reads well: its two steps, done, with their details.
  await page.goto(appUrl(server, `/slots/${slot}`));
  await page.click("[data-testid=pr-push] a");
  await page.waitForURL(/#\/jobs\/[^/]+$/);
  const jobId = page.url().split("/jobs/")[1];
  await page.waitForSelector('[data-testid=job-page][data-state="succeeded"]', { timeout: 15_000 });
  const jobText = await page.textContent("[data-testid=job-page]");
  assert.match(jobText, /Pull request deploy/);
  assert.match(jobText, /Push the pull request's head/);
  const job = await server.api("GET", `/api/jobs/${jobId}`);
  const pushed = job.steps.find((s) => s.name === "push_pr_head");
  assert.equal(pushed.detail_code, "pr_head_pushed", "the push's detail is a code the page words");
  assert.equal(pushed.detail_args.sha, head.slice(0, 8));
  await shots(page, `/jobs/${jobId}`, "job", '[data-testid=job-page][data-state="succeeded"]');

  // The admin page: the linked repository and the accepted delivery.
  await page.goto(appUrl(server, "/admin"));
  await page.waitForSelector('[data-testid=pr-repo-row][data-repo="DEMO/webshop"]', { timeout: 15_000 });
  await page.waitForSelector('[data-testid=pr-delivery][data-result="accepted"]');
  await shots(page, "/admin", "admin", '[data-testid=pr-delivery][data-result="accepted"]');

  // Merge it from the Simulator page: the slot is released (the ready reset, after the grace period).
  await page.goto(appUrl(server, "/simulator"));
  await waitLive(page);
  await page.waitForSelector(`[data-testid=prsim-pr][data-pr="${pr}"]`);
  await shots(page, "/simulator", "sim", `[data-testid=prsim-pr][data-pr="${pr}"]`);
  await page.goto(appUrl(server, "/simulator"));
  await waitLive(page);
  await page.click(`[data-testid=prsim-pr][data-pr="${pr}"] [data-testid=prsim-merge]`);
  await page.waitForSelector('[data-testid=prsim-outcome][data-result="accepted"]');
  await page.goto(appUrl(server, "/"));
  await waitLive(page);
  await page.waitForSelector(`${card}:not(:has([data-testid=slot-pr]))`, { timeout: 30_000 });
  await page.waitForSelector(`${card}[data-tone] [data-testid=card-lifecycle]`);
  await page.waitForFunction((sel) => !/Dana Developer/.test(document.querySelector(sel)?.textContent ?? "x"), card, { timeout: 30_000 });
  const released = await server.api("GET", `/api/slots/${slot}`);
  assert.equal(released.pull_request, undefined, "the slot no longer shows the PR");
  assert.equal(released.occupant, undefined, "nobody occupies it");
  await shot(page, "pr-released");
  await page.close();
});

test("a PR that finds no free slot waits on the board, live, and the admin page's deliveries follow without a reload", async () => {
  // Every vacant slot occupied, once no job runs (the reset after the
  // merge above): the next PR has none to take.
  const slots = await server.until("no job running", async () => {
    const { slots } = await server.api("GET", "/api/slots");
    return slots.every((s) => !s.active_job) && slots;
  });
  const until = new Date(Date.now() + 3_600_000).toISOString();
  for (const s of slots.filter((s) => s.lifecycle === "vacant")) {
    await server.api("POST", `/api/slots/${s.name}/occupy`, { until });
  }
  const deliver = async (d) => {
    const out = await server.api("POST", "/api/hooks/bitbucket/simulated", d);
    assert.equal(out.result, "accepted", JSON.stringify(out));
    return d;
  };

  // The admin page and the board, open before the PR arrives: neither is reloaded.
  const admin = await browser.context.newPage();
  await admin.goto(appUrl(server, "/admin"));
  await waitLive(admin);
  await admin.waitForSelector('[data-testid=pr-repo-row][data-repo="DEMO/webshop"]', { timeout: 15_000 });
  const board = await browser.context.newPage();
  await board.goto(appUrl(server, "/"));
  await waitLive(board);
  await board.waitForSelector("[data-testid=board] [data-testid=slot-card]");

  const opened = await deliver(await server.api("POST", "/api/sim/pull-requests", { project: "DEMO", repo: "webshop", branch: "feature/e2e-wait" }));
  const pr = `DEMO/webshop#${opened.id}`;
  await admin.waitForSelector(`[data-testid=pr-delivery][data-request="${opened.request_id}"][data-result="accepted"]`, { timeout: 15_000 });

  const item = await board.waitForSelector(`[data-testid=pr-waiting] [data-testid=pr-waiting-item][data-pr="${pr}"]`, { timeout: 30_000 });
  assert.match(await item.textContent(), /Change feature\/e2e-wait/);
  assert.match(await item.textContent(), /waiting \d/);
  const waiting = await server.api("GET", "/api/pull-requests?state=waiting");
  const view = waiting.pull_requests.find((p) => p.id === opened.id);
  assert.ok(view?.waiting_since && view.waiting_position > 0 && !view.slot, JSON.stringify(view));
  await shot(board, "pr-waiting");

  // Declined while waiting: it leaves the board's list, live.
  const declined = await deliver(await server.api("POST", `/api/sim/pull-requests/DEMO/webshop/${opened.id}/decline`, {}));
  await admin.waitForSelector(`[data-testid=pr-delivery][data-request="${declined.request_id}"]`, { timeout: 15_000 });
  await board.waitForSelector(`[data-testid=pr-waiting-item][data-pr="${pr}"]`, { state: "detached", timeout: 30_000 });
  await board.close();
  await admin.close();
});
