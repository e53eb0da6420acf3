// Issue 15, orphans and drift: resources made outside Slotkeeper are found
// by a run asked for from the page (the findings arrive on the live stream),
// one orphan is adopted into a slot and another deleted, each through the
// plan and its confirmation, and the next runs show them resolved. Every state is saved in en and ko,
// desktop and a 390 px phone.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { openPage, serverFlags, SIZES } from "../lib/app.js";

let server;
let browser;

before(async () => {
  // No scheduled run: this test asks for every run itself.
  server = new Server({ flags: serverFlags({ "reconcile-every": "0" }) });
  prepareAuth(server, { name: "e2e-admin", role: "admin" });
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

const open = (route, opts) => openPage(browser, server, route, opts);

async function everyWay(name, route, selector) {
  for (const lang of ["en", "ko"]) {
    for (const size of ["desktop", "phone"]) {
      const page = await open(route, { lang, size, selector });
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(size !== "phone" || wide <= SIZES.phone.width, `${name} ${lang}: ${wide} px wide on a 390 px phone`);
      await shot(page, `reconcile-${name}-${lang}-${size}`);
      await page.close();
    }
  }
}

const finding = (id) => `[data-testid=finding][data-id="${id}"]`;

test("a run from the page finds orphans live; one is adopted, one deleted, each through its plan; the next runs resolve them", async () => {
  const { slots } = await server.api("GET", "/api/slots");
  const home = slots.find((v) => v.lifecycle === "vacant" && !v.active_job);
  assert.ok(home, "the demo pool has a vacant slot");
  const app = await server.api("POST", "/api/sim/resources", { kind: "application", project: home.project_uuid, name: "stray-app" });
  const repo = await server.api("POST", "/api/sim/resources", { kind: "repository", project: "SLOT", name: "stray-e2e" });

  // The run is asked for on the page; its findings arrive without a reload.
  const page = await open("/reconcile", { selector: "[data-testid=recon-run]" });
  await page.click("[data-testid=recon-run]");
  await page.waitForSelector(finding(app.id), { timeout: 30_000 });
  await page.waitForSelector(finding(repo.id));
  assert.equal(await page.getAttribute(finding(app.id), "data-class"), "orphan");
  assert.equal(await page.getAttribute(finding(repo.id), "data-class"), "orphan");
  const classes = await page.$$eval("[data-testid=finding]", (els) => els.map((e) => e.getAttribute("data-class")));
  const rank = { drift: 0, orphan: 1, unknown: 2, resolved: 3 };
  assert.deepEqual(classes, [...classes].sort((a, b) => rank[a] - rank[b]), "problems first");
  const link = await page.getAttribute(`${finding(repo.id)} [data-testid=finding-link]`, "href");
  assert.match(link, /\/projects\/SLOT\/repos\/stray-e2e$/);
  await page.close();
  await everyWay("found", "/reconcile", finding(app.id));

  // Adopt the application into the slot whose project holds it.
  const adopt = await open("/reconcile", { selector: finding(app.id) });
  await adopt.click(`${finding(app.id)} [data-testid=adopt-open]`);
  await adopt.selectOption(`${finding(app.id)} [data-testid=adopt-slot]`, home.name);
  await adopt.click(`${finding(app.id)} [data-testid=adopt-plan]`);
  await adopt.waitForSelector("[data-testid=plan-steps] li");
  assert.match(await adopt.textContent("[data-testid=plan-resources]"), new RegExp(app.id));
  await shot(adopt, "reconcile-adopt-plan-en-desktop");
  const accepted = adopt.waitForResponse((r) => r.url().endsWith("/api/reconcile/adopt") && r.request().method() === "POST");
  await adopt.click("[data-testid=confirm]");
  assert.equal((await accepted).status(), 202);
  await adopt.waitForSelector('[data-testid=job-page][data-state="succeeded"]', { timeout: 30_000 });
  await shot(adopt, "reconcile-adopt-job-en-desktop");
  // The slot's lock is released after the job's success; wait for it on the
  // live stream, so that "nothing appended" below is not raced by it.
  await adopt.waitForFunction(
    (n) => {
      const s = window.__SLOTKEEPER__.snapshot().slots.find((x) => x.name === n);
      return s && !s.active_job;
    },
    home.name,
    { timeout: 30_000 },
  );
  await adopt.close();
  const slot = await server.api("GET", `/api/slots/${home.name}`);
  assert.ok(
    slot.resources.some((r) => r.kind === "application" && r.id === app.id),
    `slot ${home.name} tracks the adopted application: ${JSON.stringify(slot.resources)}`,
  );

  // Adopting it again is refused with the reason; nothing is appended.
  const head = (await (await fetch(`${server.url}/readyz`)).json()).position;
  const again = await fetch(`${server.url}/api/reconcile/adopt`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${server.token}` },
    body: JSON.stringify({ slot: home.name, provider: "coolify", kind: "application", id: app.id }),
  });
  assert.equal(again.status, 409);
  assert.match((await again.json()).error.message, /tracked by slot/);
  assert.equal((await (await fetch(`${server.url}/readyz`)).json()).position, head, "nothing appended");

  // The next run shows it resolved; the repository is still an orphan.
  const after = await open("/reconcile", { selector: "[data-testid=recon-run]" });
  await after.click("[data-testid=recon-run]");
  await after.waitForSelector(`${finding(app.id)}[data-class="resolved"]`, { timeout: 30_000 });
  assert.equal(await after.getAttribute(finding(repo.id), "data-class"), "orphan");
  await after.close();
  await everyWay("adopted", "/reconcile", `${finding(app.id)}[data-class="resolved"]`);

  // Delete the orphan repository: charged to the same slot, planned,
  // confirmed; the job records the delete only once Bitbucket says 404.
  const del = await open("/reconcile", { selector: finding(repo.id) });
  await del.click(`${finding(repo.id)} [data-testid=delete-open]`);
  await del.selectOption(`${finding(repo.id)} [data-testid=adopt-slot]`, home.name);
  await del.click(`${finding(repo.id)} [data-testid=adopt-plan]`);
  await del.waitForSelector("[data-testid=plan-steps] li");
  assert.match(await del.textContent("[data-testid=plan-resources]"), /SLOT\/stray-e2e/);
  await shot(del, "reconcile-delete-plan-en-desktop");
  const deleting = del.waitForResponse((r) => r.url().endsWith("/api/reconcile/delete") && r.request().method() === "POST");
  await del.click("[data-testid=confirm]");
  assert.equal((await deleting).status(), 202);
  await del.waitForSelector('[data-testid=job-page][data-state="succeeded"]', { timeout: 30_000 });
  await shot(del, "reconcile-delete-job-en-desktop");
  await del.close();
  const state = await server.api("GET", "/api/sim/state");
  assert.ok(!(state.bitbucket.repos ?? []).some((r) => r.project === "SLOT" && r.slug === "stray-e2e"), "the repository is gone at Bitbucket");

  const last = await open("/reconcile", { selector: "[data-testid=recon-run]" });
  await last.click("[data-testid=recon-run]");
  await last.waitForSelector(`${finding(repo.id)}[data-class="resolved"]`, { timeout: 30_000 });
  await last.close();
  await everyWay("deleted", "/reconcile", `${finding(repo.id)}[data-class="resolved"]`);
});
