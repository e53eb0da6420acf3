// Every page in English and Korean, on a desktop and a 390 px phone:
// axe-core finds no serious or critical violation, nothing sticks out past
// the phone's edge, and a screenshot of each lands in e2e/artifacts/ (look
// at them). The main actions are reachable with the keyboard alone.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { expectNoSeriousViolations, overflowing, tabTo } from "../lib/a11y.js";
import { openBrowser, shot } from "../lib/browser.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, pickSlot, serverFlags, waitLive } from "../lib/app.js";
import { Server } from "../lib/server.js";

let server;
let slotName;
let jobId;
let waitJobId;

before(async () => {
  server = new Server({ flags: serverFlags() });
  prepareAuth(server, { name: "a11y-admin", role: "admin" });
  await server.start();
  // A job to show: a release of a slot, run to its end before the pages
  // are visited, so every page shows a settled state.
  slotName = await pickSlot(server);
  const accepted = await server.api("POST", `/api/slots/${slotName}/release`, { reason: "e2e: accessibility walk" });
  jobId = accepted.job_id;
  assert.ok(jobId, `release answered ${JSON.stringify(accepted)}`);
  // Wait for its end the way a person does: the wait view, live.
  const browser = await openBrowser();
  try {
    await signIn(browser.context, server);
    const page = await browser.context.newPage();
    await page.goto(appUrl(server, `/jobs/${jobId}/wait`));
    // On success the wait view moves on to the slot page; a failure stays.
    await page.waitForFunction(
      (slot) => location.hash.startsWith(`#/slots/${slot}`) || !!document.querySelector("[data-testid=wait-view][data-phase=failed]"),
      slotName,
      { timeout: 90_000 },
    );
  } finally {
    await browser.close();
  }
  // A release cancelled in its grace period: its wait view stays put (a
  // successful one moves on to the slot page).
  const other = await pickSlot(server, [slotName]);
  waitJobId = (await server.api("POST", `/api/slots/${other}/release`, { reason: "e2e: accessibility walk" })).job_id;
  await server.api("POST", `/api/jobs/${waitJobId}/cancel`);
});

after(async () => {
  await server?.close();
});

/** PAGES: every route, with what shows it is rendered. */
const pages = () => [
  ["board", "/", "[data-testid=slot-card]"],
  ["slot", `/slots/${slotName}`, "[data-testid=slot-page]"],
  ["slot-asof", `/slots/${slotName}/at/${encodeURIComponent(new Date().toISOString())}`, "[data-testid=asof-rows]"],
  ["job", `/jobs/${jobId}`, "[data-testid=job-page]"],
  ["wait", `/jobs/${waitJobId}/wait`, "[data-testid=wait-view][data-phase=cancelled]"],
  ["audit", "/audit", "[data-testid=audit-row]"],
  ["remaining", "/remaining", "[data-testid=remaining-table]"],
  ["waitlist", "/waitlist", "[data-testid=waitlist-page]"],
  ["insights", "/insights", "[data-testid=insights-page]"],
  ["admin", "/admin", "[data-testid=users-table]"],
  ["account", "/account", "[data-testid=account-page]"],
  ["not-found", "/no-such-page", "[data-testid=route-not-found]"],
];

const VIEWS = [
  ["desktop", { width: 1366, height: 900 }],
  ["phone", { width: 390, height: 844 }],
];
const LANGS = [
  ["en", "en-US"],
  ["ko", "ko-KR"],
];

/** check runs axe and, on a phone, the overflow check, then saves the screenshot. */
async function check(page, name, lang, view) {
  const where = `${name} (${lang}, ${view})`;
  await expectNoSeriousViolations(page, where);
  if (view === "phone") assert.deepEqual(await overflowing(page), [], `${where}: elements overflow the 390 px viewport`);
  assert.equal(await page.evaluate(() => document.documentElement.lang), lang, `${where}: <html lang>`);
  await shot(page, `a11y-${name}-${lang}-${view}`);
}

for (const [lang, locale] of LANGS) {
  for (const [view, viewport] of VIEWS) {
    test(`every page in ${lang} on a ${view}: no serious axe violation, nothing overflows, screenshots`, async () => {
      const browser = await openBrowser({ locale, viewport });
      try {
        // Signed out first: the sign-in page.
        const out = await browser.context.newPage();
        await out.goto(appUrl(server, "/"));
        await out.waitForSelector("[data-testid=signin-page]", { timeout: 15_000 });
        await check(out, "signin", lang, view);
        await out.close();

        await signIn(browser.context, server);
        const page = await browser.context.newPage();
        for (const [name, route, ready] of pages()) {
          await page.goto(appUrl(server, route));
          await waitLive(page);
          await page.waitForSelector(ready, { timeout: 15_000 });
          await check(page, name, lang, view);
        }
        await page.close();
      } finally {
        await browser.close();
      }
    });
  }
}

test("the main actions are reachable with the keyboard alone", async () => {
  const browser = await openBrowser({ locale: "ko-KR" });
  try {
    await signIn(browser.context, server);
    const page = await browser.context.newPage();
    await page.goto(appUrl(server, "/"));
    await waitLive(page);
    await page.waitForSelector("[data-testid=slot-card]");
    // The skip link comes first and moves to the content.
    assert.equal(await tabTo(page, ".skip", 1), 1, "the first Tab lands on the skip link");
    for (const sel of ["nav a[href='#/audit']", "[data-testid=lang]", "[data-testid=slot-card] a"]) await tabTo(page, sel);

    const name = await pickSlot(server);
    await page.goto(appUrl(server, `/slots/${name}`));
    await waitLive(page);
    await page.waitForSelector("[data-testid=slot-page]");
    for (const sel of ["[data-testid=extend]", "[data-testid=release]"]) await tabTo(page, sel);
    // Enter on the focused release opens the plan; Escape closes it.
    await page.keyboard.press("Enter");
    await page.waitForSelector("[data-testid=confirm-plan]");
    await page.keyboard.press("Escape");
    await page.waitForSelector("[data-testid=confirm-plan]", { state: "detached" });

    await page.goto(appUrl(server, "/audit"));
    await waitLive(page);
    await page.waitForSelector("[data-testid=audit-row]");
    await tabTo(page, "[data-testid=chip-group-jobs]");
    await page.keyboard.press("Enter");
    await page.waitForSelector("[data-testid=chip-group-jobs][aria-pressed=true]");
    const types = await page.$$eval("[data-testid=audit-row]", (rows) => rows.map((r) => r.getAttribute("data-type")));
    const jobEvents = new Set(["JobQueued", "JobAccepted", "JobClaimed", "LeaseRenewed", "JobResumed", "JobCancelled", "JobSucceeded", "JobFailed", "JobTimedOut", "JobAbandoned", "JobReleased"]);
    assert.ok(types.length > 0 && types.every((t) => jobEvents.has(t)), `the jobs chip shows job events only: ${types}`);

    await page.goto(appUrl(server, "/remaining"));
    await waitLive(page);
    await page.waitForSelector("[data-testid=remaining-table]");
    await tabTo(page, "[data-testid=copy-id]");
    await page.close();
  } finally {
    await browser.close();
  }
});
