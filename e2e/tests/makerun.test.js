// The README's first command, taken as a newcomer takes it: `bin/slotkeeper
// serve` with no flags and no SLOTKEEPER_* settings, started from the
// repository root (so --data is the relative default ./data), then a
// release, a teardown and a promote of demo slots in the browser, each to
// success, and a new slot seeded in the simulators and registered (issue
// 38). Tests that start the binary with absolute temp paths once hid a
// demo whose every reset failed at force_push_template.
//
// The README's server listens on localhost:8080; if that port is taken this
// test fails saying so (it must not quietly test something else). When the
// repository already holds a ./data (a developer's own `make run`), the
// server runs from a fresh temporary directory instead, with the same
// relative default, so that data is neither used nor destroyed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { BIN, ROOT } from "../lib/server.js";

const URL0 = "http://localhost:8080";
let proc;
let exited;
let cwd;
let ownsCwd = false;
let browser;
const log = [];

function portTaken(port) {
  return new Promise((res) => {
    const c = createConnection({ host: "127.0.0.1", port }, () => {
      c.destroy();
      res(true);
    });
    c.once("error", () => res(false));
  });
}

async function waitReady(timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r(undefined), 100))]);
    if (early) throw new Error(`slotkeeper exited during start (${JSON.stringify(early)}):\n${log.join("").slice(-3000)}`);
    try {
      const r = await fetch(`${URL0}/readyz`, { signal: AbortSignal.timeout(1000) });
      if (r.ok) return;
      last = `readyz ${r.status}`;
    } catch (e) {
      last = String(e);
    }
  }
  throw new Error(`not ready after ${timeoutMs} ms (${last}):\n${log.join("").slice(-3000)}`);
}

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} not found: run \`make build\` first`);
  assert.equal(await portTaken(8080), false, "localhost:8080 is taken: stop the other server (this test starts the README's `make run` server, which listens there)");
  if (existsSync(join(ROOT, "data"))) {
    cwd = mkdtempSync(join(tmpdir(), "slotkeeper-makerun-"));
    ownsCwd = true;
    console.log(`# ${ROOT}/data exists; serving from ${cwd} with the same relative ./data`);
  } else {
    cwd = ROOT;
  }
  // Exactly the README: no flags, and no SLOTKEEPER_* setting leaks in.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SLOTKEEPER_")));
  proc = spawn(BIN, ["serve"], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  exited = new Promise((res) => proc.once("exit", (code, signal) => res({ code, signal })));
  for (const s of [proc.stdout, proc.stderr]) {
    s.setEncoding("utf8");
    s.on("data", (d) => log.push(d));
  }
  await waitReady(30_000);
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  if (proc && proc.exitCode === null && proc.signalCode === null) {
    proc.kill("SIGTERM");
    const res = await Promise.race([exited, new Promise((r) => setTimeout(() => r(undefined), 15_000))]);
    if (!res) {
      proc.kill("SIGKILL");
      await exited;
    }
  }
  rmSync(join(cwd, "data"), { recursive: true, force: true });
  if (ownsCwd) rmSync(cwd, { recursive: true, force: true });
});

/** get reads the API from inside the page, as the dashboard does (same session). */
function get(page, path) {
  return page.evaluate(async (p) => {
    const r = await fetch(p, { headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(`GET ${p} → ${r.status} ${await r.text()}`);
    return r.json();
  }, path);
}

async function openSlot(page, name) {
  await page.goto(`${URL0}/#/slots/${name}`);
  await page.waitForSelector('[data-testid=live-indicator][data-status="live"]', { timeout: 15_000 });
  await page.waitForSelector("[data-testid=slot-page]");
}

async function confirm(page, slot) {
  await page.waitForSelector("[data-testid=plan-steps] li");
  // A teardown asks for the slot's name to be typed before Confirm works.
  if (await page.$("[data-testid=type-name]")) await page.fill("[data-testid=type-name]", slot);
  // The demo signs this browser in as demo-admin; releasing a slot someone
  // else occupies asks for a reason (recorded in the audit).
  if (await page.$("[data-testid=release-reason]")) await page.fill("[data-testid=release-reason]", "make run walk-through");
  await page.click("[data-testid=confirm]");
}

async function jobOutcome(page, id) {
  const { events } = await get(page, `/api/jobs/${encodeURIComponent(id)}/events`);
  return events.map((e) => e.type);
}

test("make run: release, teardown and promote demo slots in the browser, each to success", { timeout: 300_000 }, async () => {
  const first = await browser.context.newPage();
  await first.goto(`${URL0}/`);
  await first.waitForSelector("[data-testid=slot-card]", { timeout: 15_000 });
  const { slots } = await get(first, "/api/slots");
  const free = (lc) => slots.filter((s) => s.lifecycle === lc && !s.active_job).map((s) => s.name);
  const [toRelease, toPromote] = free("occupied");
  const [toTeardown] = free("vacant"); // a teardown needs a vacant slot
  assert.ok(toRelease && toPromote && toTeardown, `the demo pool has two occupied slots and a vacant one (${JSON.stringify(slots.map((s) => [s.name, s.lifecycle]))})`);

  // Release first: its default grace period (2 min) runs while the others work.
  const rel = first;
  await openSlot(rel, toRelease);
  await rel.click("[data-testid=release]");
  await confirm(rel, toRelease);
  await rel.waitForURL(/#\/jobs\/[^/]+\/wait/);
  const relJob = decodeURIComponent(/#\/jobs\/([^/]+)/.exec(rel.url())[1]);
  await shot(rel, "makerun-release-wait");

  const td = await browser.context.newPage();
  await openSlot(td, toTeardown);
  await td.click("[data-testid=teardown]");
  await confirm(td, toTeardown);
  await td.waitForURL(/#\/jobs\/[^/]+$/);
  const tdJob = decodeURIComponent(/#\/jobs\/([^/]+)/.exec(td.url())[1]);

  const pr = await browser.context.newPage();
  await openSlot(pr, toPromote);
  const target = `promoted-${toPromote}`;
  await pr.fill("form.actions label:nth-of-type(1) input", "SLOT");
  await pr.fill("form.actions label:nth-of-type(2) input", target);
  await pr.click("[data-testid=promote]");
  await confirm(pr, toPromote);
  await pr.waitForURL(/#\/jobs\/[^/]+$/);
  const prJob = decodeURIComponent(/#\/jobs\/([^/]+)/.exec(pr.url())[1]);

  // Each job page shows success, and the log backs it.
  for (const [page, id, what] of [
    [td, tdJob, "teardown"],
    [pr, prJob, "promote"],
  ]) {
    await page.waitForSelector('[data-testid=job-page][data-state="succeeded"]', { timeout: 60_000 }).catch(async (e) => {
      throw new Error(`${what} did not succeed: ${(await jobOutcome(page, id)).join(" ")}\n${e}`);
    });
    assert.ok((await jobOutcome(page, id)).includes("JobSucceeded"), `${what}: JobSucceeded is in the log`);
    await shot(page, `makerun-${what}-succeeded`);
  }
  const promoted = await get(pr, `/api/slots/${toPromote}`);
  assert.ok((promoted.promoted_to ?? []).some((r) => r.slug === target), `the slot names its promoted repo (${JSON.stringify(promoted.promoted_to)})`);
  const tornDown = await get(td, `/api/slots/${toTeardown}`);
  assert.equal(tornDown.lifecycle, "retired");

  // The reset: success moves the wait view to the slot page by itself.
  await rel.waitForURL(new RegExp(`#/slots/${toRelease}$`), { timeout: 200_000 }).catch(async (e) => {
    throw new Error(`reset did not succeed: ${(await jobOutcome(rel, relJob)).join(" ")}\n${e}`);
  });
  assert.ok((await jobOutcome(rel, relJob)).includes("JobSucceeded"), "reset: JobSucceeded is in the log");
  const released = await get(rel, `/api/slots/${toRelease}`);
  assert.equal(released.lifecycle, "vacant");
  await shot(rel, "makerun-released");
});

/** post sends a state change from inside the page, as the dashboard does (its session and CSRF token). */
function post(page, path, body) {
  return page.evaluate(
    async ([p, b]) => {
      const me = await (await fetch("/api/auth/me")).json();
      const r = await fetch(p, { method: "POST", headers: { "Content-Type": "application/json", "X-CSRF-Token": me.csrf }, body: b });
      return { status: r.status, body: await r.json().catch(() => null) };
    },
    [path, JSON.stringify(body)],
  );
}

// Issue 38: a newcomer grows the demo pool — seeds a slot world in the
// simulators (docs/providers.md "Growing the demo pool") and registers it.
// The demo's scope once was its pool's projects as of start, so this
// register was refused 403 outside_scope; now it follows the simulators,
// and what they do not hold stays outside.
test("make run: seed a new slot in the simulators and register it; the board shows it live", { timeout: 120_000 }, async () => {
  const page = await browser.context.newPage();
  await page.goto(`${URL0}/`);
  await page.waitForSelector('[data-testid=live-indicator][data-status="live"]', { timeout: 15_000 });
  await page.waitForSelector("[data-testid=slot-card]", { timeout: 15_000 });

  const seeded = await post(page, "/api/sim/slots", { name: "newslot" });
  assert.equal(seeded.status, 201, `seed: ${JSON.stringify(seeded)}`);
  const fx = seeded.body;
  const cmd = {
    name: "newslot",
    project_uuid: fx.project_uuid,
    app_uuid: fx.app_uuid,
    db_uuid: fx.db_uuid,
    repo: { project: fx.repo.project, slug: fx.repo.slug },
    template_repo: { project: fx.template.project, slug: fx.template.slug },
    template_ref: fx.template_ref,
  };

  // A project the simulators never created is outside the scope.
  const stranger = await post(page, "/api/slots", { ...cmd, name: "stranger", project_uuid: "nosuchproject0000000000" });
  assert.equal(stranger.status, 403, `a project the simulators do not hold: ${JSON.stringify(stranger)}`);
  assert.equal(stranger.body?.error?.reason, "outside_scope");

  const reg = await post(page, "/api/slots", cmd);
  assert.equal(reg.status, 201, `register the seeded slot: ${JSON.stringify(reg)}`);
  await page.waitForSelector('[data-testid=slot-card][data-slot="newslot"]', { timeout: 15_000 });
  await shot(page, "makerun-newslot-board");

  await page.goto(`${URL0}/#/slots/newslot`);
  await page.waitForSelector("[data-testid=slot-page]");
  const view = await get(page, "/api/slots/newslot");
  assert.equal(view.project_uuid, fx.project_uuid);
  assert.equal(view.lifecycle, "vacant");
});
