// Helpers that drive the dashboard the way a person does.
import assert from "node:assert/strict";

/** HB is the heartbeat the e2e servers run with (ms); the page is told the same. */
export const HB = 1000;

/** appUrl is the dashboard at a hash route, with the shortened heartbeat. */
export function appUrl(server, route = "/") {
  return `${server.url}/?heartbeat_ms=${HB}#${route}`;
}

/** serverFlags are the flags every e2e server starts with (missing ones are skipped). */
export function serverFlags(extra = {}) {
  // No deadline resets: the demo pool's deadlines are minutes away and a
  // reset the test did not ask for would race the one it did.
  // No automatic sign-in: every test signs in through the sign-in page.
  // Step timeout 10 s: on the shared 2-core machine (load 12-20) the
  // template force-push alone takes about 3 s, so 3 s timed resets out.
  // No drain delay: a stopped server must go away at once (the stale test
  // times the banner from the stop; the 5 s default kept the stream alive).
  return { heartbeat: `${HB}ms`, grace: "3s", "step-timeout": "10s", "deadline-reset": false, "demo-autologin": false, "drain-delay": "0s", ...extra };
}

/** SIZES are the screens the page tests look at: a desktop and a 390 px phone. */
export const SIZES = { desktop: { width: 1366, height: 900 }, phone: { width: 390, height: 844 } };

/** WAYS are each language on each screen. */
export const WAYS = [
  ["en", "desktop"],
  ["en", "phone"],
  ["ko", "desktop"],
  ["ko", "phone"],
];

/**
 * openPage shows route in a new page of browser, in lang (as if chosen with
 * the switch) at size, waits for it to be live and then for selector (if
 * one is given) within timeout ms.
 */
export async function openPage(browser, server, route, { lang = "en", size = "desktop", selector, timeout = 15_000 } = {}) {
  const page = await browser.context.newPage();
  await page.setViewportSize(SIZES[size]);
  await page.addInitScript((l) => localStorage.setItem("slotkeeper.lang", l), lang);
  await page.goto(appUrl(server, route));
  await waitLive(page);
  if (selector) await page.waitForSelector(selector, { timeout });
  return page;
}

/** waitLive waits for the always-visible indicator to say live. */
export async function waitLive(page, timeout = 15_000) {
  await page.waitForSelector('[data-testid=live-indicator][data-status="live"]', { timeout });
}

/**
 * pickSlot finds a slot with no job running, preferring one the signed-in
 * UI user (server.user) occupies, then a vacant one occupied for them (so
 * a release from the page is their own and needs no reason), then any
 * occupied one.
 */
export async function pickSlot(server, exclude = []) {
  const { slots } = await server.api("GET", "/api/slots");
  const free = slots.filter((v) => !v.active_job && !exclude.includes(v.name));
  const me = server.user?.name;
  const mine = free.find((v) => v.lifecycle === "occupied" && me && v.occupant === me);
  if (mine) return mine.name;
  const vacant = free.find((v) => v.lifecycle === "vacant");
  if (vacant) {
    const until = new Date(Date.now() + 3_600_000).toISOString();
    await server.api("POST", `/api/slots/${vacant.name}/occupy`, me ? { by: me, until } : { until });
    return vacant.name;
  }
  const s = free.find((v) => v.lifecycle === "occupied");
  assert.ok(s, "the demo pool has no free slot");
  return s.name;
}

/**
 * recordSteps installs a MutationObserver that logs every step state the
 * page shows, with the time it appeared; readSteps returns the log.
 */
export async function recordSteps(page) {
  await page.evaluate(() => {
    const log = [];
    window.__stepLog = log;
    const seen = new Map();
    const scan = () => {
      for (const el of document.querySelectorAll("[data-step]")) {
        const k = el.getAttribute("data-step");
        const v = el.getAttribute("data-state");
        if (seen.get(k) !== v) {
          seen.set(k, v);
          log.push({ step: k, state: v, t: performance.now() });
        }
      }
    };
    new MutationObserver(scan).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-state"] });
    scan();
  });
}

export function readSteps(page) {
  return page.evaluate(() => window.__stepLog);
}

/** jobIdFromUrl reads the job id out of #/jobs/<id>/wait. */
export function jobIdFromUrl(url) {
  const m = /#\/jobs\/([^/]+)/.exec(url);
  assert.ok(m, `no job id in ${url}`);
  return decodeURIComponent(m[1]);
}

/**
 * recordClaims logs every phase the wait view shows and every route the tab
 * visits, with times, so a test can prove the page never claimed success
 * (phase "succeeded", or leaving the wait view for the slot page) that the
 * event log does not back. readClaims returns {phases, routes}.
 */
export async function recordClaims(page) {
  await page.evaluate(() => {
    const log = { phases: [], routes: [location.hash] };
    window.__claimLog = log;
    let last;
    const scan = () => {
      const v = document.querySelector("[data-testid=wait-view]")?.getAttribute("data-phase") ?? null;
      if (v !== last) {
        last = v;
        log.phases.push({ phase: v, t: performance.now() });
      }
    };
    new MutationObserver(scan).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-phase"] });
    window.addEventListener("hashchange", () => log.routes.push(location.hash));
    scan();
  });
}

export function readClaims(page) {
  return page.evaluate(() => window.__claimLog);
}
