// Issue 28 (audit by replay): a slot as it was at a moment, in a real
// browser against the real server. A vacant demo slot is occupied; the
// audit row of that occupancy links to "the slot at this moment", the page
// before it shows the slot vacant and marked "as of …, not live", the way
// back to live shows the occupant; the freshness badge says live. In en
// and ko, on a desktop and a 390 px phone.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { openPage, serverFlags, SIZES } from "../lib/app.js";

let server;
let browser;
const ME = "e2e-asof";

before(async () => {
  server = new Server({ flags: serverFlags() });
  prepareAuth(server, { name: ME, role: "admin" });
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

const open = (route, lang, size) => openPage(browser, server, route, { lang, size });

async function fits(page, what) {
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(wide <= SIZES.phone.width, `${what}: the page is ${wide} px wide on a 390 px phone`);
}

test("the slot as of a moment, from the audit row, and back to live", async () => {
  const { slots } = await server.api("GET", "/api/slots");
  const vacant = slots.find((v) => v.lifecycle === "vacant" && !v.active_job);
  assert.ok(vacant, "the demo pool has no vacant slot");
  const until = new Date(Date.now() + 3_600_000).toISOString();
  const occupied = await server.api("POST", `/api/slots/${vacant.name}/occupy`, { by: ME, until });
  const at = occupied.position; // the SlotOccupied event
  const before = at - 1;

  for (const [lang, size] of [
    ["en", "desktop"],
    ["en", "phone"],
    ["ko", "phone"],
  ]) {
    // The audit row of the occupancy links to the slot at that moment.
    const audit = await open("/audit", lang, size);
    const link = audit.locator(`[data-testid=audit-moment][href$="/slots/${vacant.name}/at/${at}"]`);
    await link.first().waitFor({ timeout: 20_000 });
    await link.first().click();
    await audit.waitForSelector("[data-testid=asof-banner]", { timeout: 20_000 });
    assert.equal(await audit.getByTestId("asof-occupant").textContent(), ME);
    await audit.close();

    // Just before it: vacant, marked not live, with the timeline.
    const page = await open(`/slots/${vacant.name}/at/${before}`, lang, size);
    const banner = page.getByTestId("asof-banner");
    await banner.waitFor({ timeout: 20_000 });
    assert.equal(await banner.getAttribute("data-live"), "false");
    const text = await banner.textContent();
    assert.match(text, lang === "ko" ? new RegExp(`위치 ${before}.*실시간이 아닙니다`) : new RegExp(`As of .*position ${before}.*not live`));
    assert.equal(await page.getByTestId("slot-lifecycle").getAttribute("class"), "badge lc lc-vacant");
    await page.getByTestId("asof-rows").waitFor({ timeout: 20_000 });
    assert.equal(await page.getByTestId("freshness").getAttribute("data-state"), "live");
    await shot(page, `asof-${lang}-${size}`);
    if (size === "phone") await fits(page, `as of ${lang}`);
    // Back to live: the occupant is there.
    await page.getByTestId("asof-back").click();
    await page.waitForSelector("[data-testid=slot-page]", { timeout: 20_000 });
    assert.match(await page.getByTestId("slot-page").textContent(), new RegExp(ME));
    if (size === "phone") await fits(page, `slot page ${lang}`);
    await page.close();
  }
});
