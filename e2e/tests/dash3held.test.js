// Issue 27 item 3: a vacant slot the waitlist holds for its head is shown
// as held (not "Vacant · Occupy for 8 h"), its holder gets a banner on the
// board, and with the pool full "Join the waitlist" is the primary action
// while "Take the next free slot" is off. en and ko, desktop and phone.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, session, signIn } from "../lib/auth.js";
import { openPage, serverFlags, WAYS } from "../lib/app.js";
import { expectNoSeriousViolations } from "../lib/a11y.js";

let server;
let admin;
let wendy;

before(async () => {
  server = new Server({ flags: serverFlags({ "offer-ttl": "10m", "step-timeout": "60s" }) });
  prepareAuth(server, { name: "e2e-admin", role: "admin", users: [["wendy", "member"]] });
  await server.start();
  admin = await openBrowser();
  await signIn(admin.context, server);
  wendy = await openBrowser();
  await signIn(wendy.context, server, server.users.wendy);
});

after(async () => {
  await admin?.close();
  await wendy?.close();
  await server?.close();
});

async function board(browser, lang, size) {
  const page = await openPage(browser, server, "/", { lang, size });
  await page.waitForSelector("[data-testid=slot-card]");
  return page;
}

test("held for the waitlist: shown as held, a banner for the holder, Join the waitlist primary when the pool is full", async () => {
  const until = new Date(Date.now() + 3_600_000).toISOString();
  const { slots } = await server.api("GET", "/api/slots");
  const usable = slots.filter((s) => !s.active_job && (s.lifecycle === "vacant" || s.lifecycle === "occupied"));
  for (const s of usable.filter((v) => v.lifecycle === "occupied")) await server.api("POST", `/api/slots/${s.name}/extend`, { until });
  for (const s of usable.filter((v) => v.lifecycle === "vacant")) await server.api("POST", `/api/slots/${s.name}/occupy`, { by: "e2e-admin", until });
  const hers = usable[0].name;

  // The pool is full: joining the waitlist is what a person can do.
  for (const [lang, size] of WAYS) {
    const page = await board(admin, lang, size);
    await page.waitForSelector("[data-testid=join-waitlist]");
    assert.equal(await page.getByTestId("take-next").isDisabled(), true, `${lang} ${size}: take-next is off with no free slot`);
    assert.doesNotMatch((await page.getByTestId("take-next").getAttribute("class")) ?? "", /primary/);
    assert.match((await page.getByTestId("join-waitlist").getAttribute("class")) ?? "", /primary/);
    await shot(page, `dash3-pool-full-${lang}-${size}`);
    await expectNoSeriousViolations(page, `pool full ${lang} ${size}`);
    await page.close();
  }

  const w = await session(server, server.users.wendy);
  const joined = await w.call("POST", "/api/waitlist", { duration: "2h" });
  assert.equal(joined.status, 201, JSON.stringify(joined.body));
  // Item 4: the waitlist's "2h0m0s" and the offer's "10m0s" read as people write them.
  for (const [lang, size] of WAYS) {
    const page = await openPage(admin, server, "/waitlist", { lang, size });
    await page.waitForSelector("[data-testid=queue-row]");
    const text = await page.locator("main").textContent();
    assert.doesNotMatch(text, /\d+h\d+m\d+s|\d+m\d+s/, `${lang} ${size}: no Go duration on the waitlist page`);
    assert.match(await page.getByTestId("queue-row").first().textContent(), lang === "en" ? /2h/ : /2시간/);
    await shot(page, `dash3-waitlist-${lang}-${size}`);
    await expectNoSeriousViolations(page, `waitlist ${lang} ${size}`);
    await page.close();
  }
  await server.api("POST", `/api/slots/${hers}/release`, { reason: "e2e: hand it to the waitlist" });

  for (const [lang, size] of WAYS) {
    const page = await board(admin, lang, size);
    const card = page.locator(`[data-testid=slot-card][data-slot="${hers}"]`);
    // The reset runs, then the waitlist offers the slot to wendy: live.
    await card.locator("[data-testid=card-held]").waitFor({ timeout: 120_000 });
    const held = await card.locator("[data-testid=card-held]").textContent();
    assert.match(held, lang === "en" ? /Held for wendy/ : /wendy님을 위해 확보됨/);
    assert.match(await card.getByTestId("card-lifecycle").textContent(), lang === "en" ? /Held \(waitlist\)/ : /확보됨/);
    assert.equal(await card.getByTestId("card-occupy").count(), 0, "no occupy on a slot held for someone else");
    assert.equal(await page.getByTestId("take-next").isDisabled(), true, "a held slot is not free");
    await shot(page, `dash3-held-${lang}-${size}`);
    await expectNoSeriousViolations(page, `held ${lang} ${size}`);
    await page.close();

    const mine = await board(wendy, lang, size);
    await mine.waitForSelector("[data-testid=held-banner]");
    assert.match(await mine.getByTestId("held-banner").textContent(), new RegExp(lang === "en" ? `Slot ${hers} is held for you` : `슬롯 ${hers}[이가] 당신을 위해 확보되었습니다`));
    await mine.locator(`[data-testid=slot-card][data-slot="${hers}"] [data-testid=card-accept]`).waitFor();
    await shot(mine, `dash3-held-banner-${lang}-${size}`);
    await expectNoSeriousViolations(mine, `held banner ${lang} ${size}`);
    await mine.close();
  }
});
