// Issue 12 item 10: "not everything a job touches is tracked". A reset that
// stops after listing the app's volumes leaves them on the slot page and in
// the remaining resources; a delete Coolify accepted (queued) but nobody
// confirmed shows "deleting (accepted at …)", unlike one never sent.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, pickSlot, serverFlags, waitLive } from "../lib/app.js";

let server;
let browser;

before(async () => {
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

/** waitReleased waits, on the page's own live store, until the job ended and released its slot. */
async function waitReleased(page, name, id) {
  await page.waitForFunction(
    ([n, j]) => {
      const st = window.__SLOTKEEPER__.snapshot();
      const job = st.jobs.find((v) => v.id === j);
      const slot = st.slots.find((v) => v.name === n);
      return job && ["failed", "succeeded", "timed_out", "cancelled", "abandoned"].includes(job.state) && slot && !slot.active_job;
    },
    [name, id],
    { timeout: 60_000 },
  ).catch(async (err) => {
    const st = await page.evaluate(() => window.__SLOTKEEPER__.snapshot());
    console.log(`# waiting for ${name}/${id}: page store ${JSON.stringify({ position: st.position, stream: st.stream, jobs: st.jobs.map((j) => [j.id, j.state]), slot: st.slots.find((v) => v.name === name) })}`);
    throw err;
  });
}

test("listed volumes and an accepted, unconfirmed delete stay visible", async () => {
  const page = await browser.context.newPage();
  const a = await pickSlot(server);
  const b = await pickSlot(server, [a]);
  const slotB = await server.api("GET", `/api/slots/${b}`);
  const faults = [
    // Slot a: deleting a volume is refused, after the step listed them.
    await server.api("POST", "/api/sim/faults", { endpoint: "coolify.DeleteStorage", status: 403 }),
    // Slot b: its database delete is queued, but the confirming GET is refused
    // (skip 1: the reset's preflight reads the database first, issue 32).
    await server.api("POST", "/api/sim/faults", { endpoint: "coolify.GetDatabase", resource: slotB.db_uuid, status: 403, skip: 1 }),
  ];
  try {
    await page.goto(appUrl(server, "/"));
    await waitLive(page);
    const ja = await server.api("POST", `/api/slots/${a}/release`, { reason: "e2e" });
    const jb = await server.api("POST", `/api/slots/${b}/release`, { reason: "e2e" });
    await waitReleased(page, a, ja.job_id);
    await waitReleased(page, b, jb.job_id);

    // Slot a: the volumes are listed resources, not deleting; env vars were
    // confirmed deleted and are gone.
    await page.goto(appUrl(server, `/slots/${a}`));
    await page.waitForSelector('[data-testid=resources] [data-resource^="volume:"]', { timeout: 15_000 });
    const rowsA = await page.$$eval("[data-testid=resources] li", (els) =>
      els.map((e) => ({ res: e.getAttribute("data-resource"), deleting: e.getAttribute("data-deleting"), text: e.textContent })),
    );
    console.log(`# ${a} resources: ${JSON.stringify(rowsA)}`);
    assert.ok(rowsA.some((r) => r.res.startsWith("volume:") && r.deleting === null), "a listed volume is shown, not as deleting");
    assert.ok(!rowsA.some((r) => r.res.startsWith("env_var:")), "confirmed env vars are gone");
    await shot(page, "tracked-volumes-slot-page");

    // Slot b: the database shows deleting (accepted at …); the rest do not.
    await page.goto(appUrl(server, `/slots/${b}`));
    const dbSel = `[data-testid=resources] [data-resource="database:${slotB.db_uuid}"]`;
    await page.waitForSelector(`${dbSel}[data-deleting=true]`, { timeout: 15_000 });
    const dbText = await page.textContent(dbSel);
    assert.match(dbText, /deleting \(accepted at .+, not confirmed yet\)/);
    assert.equal(await page.$$eval("[data-testid=resources] [data-deleting=true]", (els) => els.length), 1, "only the accepted delete shows as deleting");
    await shot(page, "tracked-deleting-slot-page");

    // The log backs the page: b's job recorded DeleteAccepted, a's did not
    // (its database delete was confirmed), and a's job listed its volumes.
    const evA = (await server.api("GET", `/api/jobs/${ja.job_id}/events`)).events.map((e) => e.type);
    const evB = (await server.api("GET", `/api/jobs/${jb.job_id}/events`)).events.map((e) => e.type);
    assert.ok(evB.includes("DeleteAccepted") && !evB.includes("DBDeleted"), `b: ${evB.join(" ")}`);
    assert.ok(evA.includes("ResourcesListed") && evA.includes("DBDeleted"), `a: ${evA.join(" ")}`);

    // The remaining-resources page lists both, b's database as deleting.
    await page.goto(appUrl(server, "/remaining"));
    await page.waitForSelector("[data-testid=remaining-table] [data-testid=deleting]", { timeout: 15_000 });
    const rows = await page.$$eval("[data-testid=remaining-table] tbody tr", (els) => els.map((e) => e.textContent));
    assert.ok(rows.some((r) => r.includes(a) && r.includes("Volume")), `remaining lists a's volume: ${JSON.stringify(rows)}`);
    assert.ok(rows.some((r) => r.includes(b) && r.includes(slotB.db_uuid) && /deleting \(accepted at/.test(r)), "remaining shows b's database deleting");
    const api = (await server.api("GET", "/api/resources/remaining")).resources;
    assert.ok(api.some((r) => r.slot === b && r.resource.id === slotB.db_uuid && r.delete_accepted_at));
    await shot(page, "tracked-remaining");
  } finally {
    for (const f of faults) await server.api("DELETE", `/api/sim/faults/${f.id}`).catch(() => undefined);
    await page.close();
  }
});
