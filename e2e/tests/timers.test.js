// setInterval is wrapped before the app loads; an hour's worth of updates
// (720 changes, the old dashboard's 5 s poll over an hour) and repeated
// navigation must not add a single interval (seed row 8: +2,880/h).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, serverFlags, waitLive } from "../lib/app.js";

const UPDATES = 720;
let server;
let browser;

before(async () => {
  server = new Server({ flags: serverFlags({ "commands-per-second": 0 }) });
  prepareAuth(server);
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** wrapIntervals counts setInterval/clearInterval calls from before the app loads. */
function wrapIntervals(page) {
  return page.addInitScript(() => {
    const calls = { set: 0, clear: 0, active: new Set() };
    window.__intervals = calls;
    const set = window.setInterval;
    const clear = window.clearInterval;
    window.setInterval = function (...args) {
      calls.set++;
      const id = set.apply(this, args);
      calls.active.add(id);
      return id;
    };
    window.clearInterval = function (id) {
      calls.active.delete(id);
      return clear.call(this, id);
    };
    // Count EventSources too: one stream per tab, reopened, never doubled.
    const ES = window.EventSource;
    const opened = [];
    window.__eventSources = opened;
    window.EventSource = class extends ES {
      constructor(...args) {
        super(...args);
        opened.push(this);
      }
    };
  });
}

test("the number of timers stays constant over an hour of updates", async () => {
  const page = await browser.context.newPage();
  await wrapIntervals(page);
  const count = () => page.evaluate(() => ({ set: window.__intervals.set, active: window.__intervals.active.size }));

  await page.goto(appUrl(server, "/"));
  await waitLive(page);
  await page.waitForSelector("[data-testid=slot-card]");
  const before = await count();

  const { slots } = await server.api("GET", "/api/slots");
  const names = [];
  for (const s of slots) {
    if (s.active_job) continue;
    if (s.lifecycle === "vacant") {
      await server.api("POST", `/api/slots/${s.name}/occupy`, { until: new Date(Date.now() + 3_600_000).toISOString() });
    } else if (s.lifecycle !== "occupied") continue;
    names.push(s.name);
  }
  assert.ok(names.length > 0, "some slot can be extended");
  const routes = ["/", `/slots/${names[0]}`, "/audit", "/remaining", "/"];
  for (let i = 0; i < UPDATES; i++) {
    const name = names[i % names.length];
    await server.api("POST", `/api/slots/${name}/extend`, { until: new Date(Date.now() + 3_600_000 + i * 1000).toISOString() });
    if (i % 60 === 59) await page.evaluate((r) => (location.hash = r), routes[(i / 60) % routes.length | 0]);
  }
  await page.evaluate(() => (location.hash = "/"));
  // Wait until the page has applied everything the server has.
  const head = (await (await fetch(`${server.url}/readyz`)).json()).position;
  await page.waitForFunction((h) => window.__SLOTKEEPER__.snapshot().position >= h, head, { timeout: 30_000 });
  const afterCount = await count();
  console.log(`# setInterval calls: before ${before.set}, after ${UPDATES} updates ${afterCount.set}; active intervals ${before.active} → ${afterCount.active}`);
  assert.equal(afterCount.set, before.set, "no setInterval call during an hour of updates");
  assert.equal(afterCount.active, before.active);
  assert.ok(before.active <= 1, `one global ticker at most (${before.active} active)`);
  await page.close();
});

test("an hour of (fake) clock — 3,600 ticks, watchdog trips and reconnects — adds no interval", async () => {
  const page = await browser.context.newPage();
  // The fake clock first, then the wrapper around its setInterval.
  await page.clock.install();
  await wrapIntervals(page);
  const count = () => page.evaluate(() => ({ set: window.__intervals.set, active: window.__intervals.active.size }));
  await page.goto(appUrl(server, "/"));
  await page.waitForSelector("[data-testid=slot-card]");
  const before = await count();
  assert.ok(before.set >= 1, "the wrapper sees the app's ticker");
  await page.clock.runFor("01:00:00");
  const afterCount = await count();
  const es = await page.evaluate(() => ({
    opened: window.__eventSources.length,
    open: window.__eventSources.filter((e) => e.readyState !== 2).length,
  }));
  console.log(`# fake hour: EventSources opened ${es.opened} (watchdog reopens), not closed ${es.open}`);
  // The hour really ran through the app's timers: the watchdog (driven by
  // the one ticker) saw no heartbeat in fake time, tripped and reopened.
  // (Countdowns show server time, which the next snapshot re-learns.)
  assert.ok(es.opened > 1, "the watchdog tripped and the stream was reopened");
  assert.ok(es.open <= 1, "never more than one stream per tab");
  console.log(`# fake hour: setInterval calls ${before.set} → ${afterCount.set}; active ${before.active} → ${afterCount.active}`);
  assert.equal(afterCount.set, before.set);
  assert.equal(afterCount.active, before.active);
  await page.close();
});
