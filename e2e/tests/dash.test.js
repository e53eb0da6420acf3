// Issue 14, "what is wrong today": extend only adds time, a release
// cancelled in its grace period says nothing changed, a 404 says not found,
// an unknown route is no board, and the promote plan names its target.
// Every page is saved in en and ko, desktop and a 390 px phone.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { openPage, pickSlot, serverFlags, SIZES } from "../lib/app.js";

let server;
let browser;

before(async () => {
  // A long grace period: the release below is cancelled inside it.
  server = new Server({ flags: serverFlags({ grace: "120s" }) });
  // "occupy for someone" names an existing account (issue 25): the long name is one.
  prepareAuth(server, { name: "e2e-admin", role: "admin", users: [["firstname.middlename.lastname.of.a.very.long.occupant.name", "viewer"]] });
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

const open = (route, opts) => openPage(browser, server, route, opts);

/** everyWay saves route in en and ko, desktop and phone, after check(page, lang) passes. */
async function everyWay(name, route, selector, check = async () => {}) {
  for (const lang of ["en", "ko"]) {
    for (const size of ["desktop", "phone"]) {
      const page = await open(route, { lang, size, selector });
      await check(page, lang);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      if (size === "phone" && wide > SIZES.phone.width) console.log(`# ${name} ${lang}: page is ${wide} px wide on a 390 px phone`);
      await shot(page, `dash-${name}-${lang}-${size}`);
      await page.close();
    }
  }
}

test("extend adds to the deadline; the server refuses an earlier one and appends nothing", async () => {
  const name = await pickSlot(server);
  const far = new Date(Date.now() + 30 * 3_600_000).toISOString(); // 1 d 6 h left
  await server.api("POST", `/api/slots/${name}/extend`, { until: far });
  const page = await open(`/slots/${name}`, { selector: "[data-testid=extend]" });
  assert.match(await page.textContent("[data-testid=extend]"), /Extend by 8 h/);
  const answer = page.waitForResponse((r) => r.url().endsWith(`/api/slots/${name}/extend`));
  await page.click("[data-testid=extend]");
  assert.equal((await answer).status(), 200);
  const after = await server.api("GET", `/api/slots/${name}`);
  assert.equal(Date.parse(after.deadline) - Date.parse(far), 8 * 3_600_000, `deadline ${after.deadline}, was ${far}`);
  await page.close();

  const head = (await (await fetch(`${server.url}/readyz`)).json()).position;
  const r = await fetch(`${server.url}/api/slots/${name}/extend`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${server.token}` },
    body: JSON.stringify({ until: new Date(Date.now() + 8 * 3_600_000).toISOString() }),
  });
  assert.equal(r.status, 409, "an extend that shortens the deadline is refused");
  const head2 = (await (await fetch(`${server.url}/readyz`)).json()).position;
  assert.equal(head2, head, "nothing appended");
  await everyWay("slot", `/slots/${name}`, "[data-testid=extend]");
});

test("a release cancelled in its grace period says nothing changed, in en and ko", async () => {
  const name = await pickSlot(server);
  const { job_id: id } = await server.api("POST", `/api/slots/${name}/release`, { reason: "e2e: cancelled in the grace period" });
  await server.api("POST", `/api/jobs/${id}/cancel`, {});
  await everyWay("wait-cancelled", `/jobs/${id}/wait`, "[data-testid=wait-cancelled]", async (page, lang) => {
    const text = await page.textContent("[data-testid=wait-status]");
    assert.match(text, lang === "ko" ? /바뀐 것은 없습니다/ : /nothing changed/);
    assert.equal(await page.$("[data-testid=wait-failed]"), null, "no failure shown");
  });
  await everyWay("slot-cancelled", `/slots/${name}`, "[data-testid=untouched]", async (page, lang) => {
    const text = await page.textContent("[data-testid=slot-page]");
    assert.doesNotMatch(text, /last job cancelled|Still there|남아 있음/);
    assert.equal(await page.$("[data-testid=recovery]"), null, "no red failure");
    if (lang === "ko") assert.match(text, /바뀐 것은 없습니다/);
  });
  await everyWay("job-cancelled", `/jobs/${id}`, "[data-testid=untouched]", async (page) => {
    assert.equal(await page.$("[data-testid=recovery]"), null, "no red failure on the job page");
    assert.equal(await page.$("[data-testid=job-remaining]"), null, "no leftovers listed");
    // The event history is folded under the timeline (issue 35): its rows are there, not shown.
    await page.waitForSelector("[data-testid=timeline] li", { state: "attached" });
  });
  await everyWay("audit", "/audit", "[data-testid=audit-table] tbody tr");
  await everyWay("board", "/", "[data-testid=slot-card]", async (page) => {
    const card = page.locator(`[data-testid=slot-card][data-slot="${name}"]`);
    assert.equal(await card.locator("[data-testid=warn-remaining]").count(), 0, "no leftovers flagged");
    assert.equal(await card.locator("[data-testid=warn-failed]").count(), 0, "no failure flagged");
  });
});

test("a 404 says not found, and an unknown route is no board", async () => {
  const unknown = "4f9c3c1e-1111-4c3e-9c1e-111111111111";
  await everyWay("wait-not-found", `/jobs/${unknown}/wait`, "[data-testid=wait-not-found]", async (page) => {
    assert.equal(await page.$("[data-testid=cannot-verify]"), null);
  });
  const { slots } = await server.api("GET", "/api/slots");
  const never = slots.find((s) => !s.latest_jobs?.reset);
  if (never) {
    await everyWay("no-reset", `/slots/${never.name}/reset`, "[data-testid=no-reset]", async (page) => {
      assert.equal(await page.$("[data-testid=cannot-verify]"), null);
    });
  }
  await everyWay("route-not-found", "/no/such/page", "[data-testid=route-not-found]", async (page) => {
    assert.equal(await page.$("[data-testid=board]"), null);
  });
});

test("the promote confirmation says whether the target repository exists", async () => {
  const name = await pickSlot(server);
  const slot = await server.api("GET", `/api/slots/${name}`);
  for (const [what, repoName, state] of [
    ["exists", slot.repo.slug, "exists"],
    ["free", `${name}-copy-e2e`, "free"],
  ]) {
    for (const lang of ["en", "ko"]) {
      for (const size of ["desktop", "phone"]) {
        const page = await open(`/slots/${name}`, { lang, size, selector: "[data-testid=promote]" });
        await page.fill('form.actions input >> nth=0', slot.repo.project);
        await page.fill('form.actions input >> nth=1', repoName);
        await page.click("[data-testid=promote]");
        await page.waitForSelector("[data-testid=plan-target]", { timeout: 15_000 });
        assert.equal(await page.getAttribute("[data-testid=plan-target]", "data-state"), state);
        assert.equal(await page.isDisabled("[data-testid=confirm]"), state === "exists");
        await shot(page, `dash-promote-${what}-${lang}-${size}`);
        await page.close();
      }
    }
  }
});

test("long names wrap on a 390 px phone: nothing scrolls sideways or is clipped", async () => {
  const { slots } = await server.api("GET", "/api/slots");
  const vacant = slots.find((s) => s.lifecycle === "vacant" && !s.active_job);
  assert.ok(vacant, "a vacant slot");
  const by = "firstname.middlename.lastname.of.a.very.long.occupant.name";
  await server.api("POST", `/api/slots/${vacant.name}/occupy`, { by, until: new Date(Date.now() + 3_600_000).toISOString() });
  for (const [route, selector] of [
    ["/", `[data-testid=slot-card][data-slot="${vacant.name}"]`],
    [`/slots/${vacant.name}`, "[data-testid=slot-page]"],
    ["/audit", "[data-testid=audit-table]"],
  ]) {
    for (const lang of ["en", "ko"]) {
      const page = await open(route, { lang, size: "phone", selector });
      await page.waitForFunction((n) => document.body.textContent.includes(n), by);
      const m = await page.evaluate((sel) => {
        const el = document.querySelector(sel);
        const clipped = [...el.querySelectorAll("*")].filter((e) => e.clientWidth > 1 && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === "hidden");
        const ths = [...document.querySelectorAll("th")].map((th) => ({ text: th.textContent, h: th.getBoundingClientRect().height, lh: parseFloat(getComputedStyle(th).lineHeight) || 20 }));
        return { page: document.documentElement.scrollWidth, el: el.getBoundingClientRect().right, clipped: clipped.length, tallHeaders: ths.filter((t) => t.h > 2.5 * t.lh).map((t) => t.text) };
      }, selector);
      await shot(page, `dash-long-${route === "/" ? "board" : route.split("/")[1]}-${lang}-phone`);
      assert.ok(m.page <= 390, `${route} ${lang}: the page is ${m.page} px wide on a 390 px phone`);
      assert.ok(m.el <= 390, `${route} ${lang}: ${selector} ends at ${m.el} px`);
      assert.equal(m.clipped, 0, `${route} ${lang}: clipped text`);
      assert.deepEqual(m.tallHeaders, [], `${route} ${lang}: table headers wrap onto many lines`);
      await page.close();
    }
  }
});
