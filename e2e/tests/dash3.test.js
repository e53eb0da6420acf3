// Issue 27 (the dashboard, second pass): what a daily user trips on. Each
// item in en and ko, on a desktop and a 390 px phone, with the axe run and
// a screenshot per page under artifacts/ (dash3-*).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openBrowser, shot } from "../lib/browser.js";
import { Server } from "../lib/server.js";
import { prepareAuth, signIn } from "../lib/auth.js";
import { appUrl, openPage, serverFlags, SIZES, WAYS } from "../lib/app.js";
import { expectNoSeriousViolations } from "../lib/a11y.js";

let server;
let browser;
const ME = "e2e-admin";

before(async () => {
  server = new Server({ flags: serverFlags({ "step-timeout": "45s" }) });
  prepareAuth(server, { name: ME, role: "admin", users: [["fault-victim", "member"]] });
  await server.start();
  browser = await openBrowser();
  await signIn(browser.context, server);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

const open = (route, opts) => openPage(browser, server, route, { timeout: 20_000, ...opts });

/** done saves the screen, runs axe and checks a phone screen is no wider than 390 px. */
async function done(page, name, lang, size) {
  await shot(page, `dash3-${name}-${lang}-${size}`);
  await expectNoSeriousViolations(page, `${name} ${lang} ${size}`);
  if (size === "phone") {
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(wide <= SIZES.phone.width, `${name} ${lang}: ${wide} px wide on a 390 px phone`);
  }
  await page.close();
}

const slots = async () => (await server.api("GET", "/api/slots")).slots;
const inHours = (h) => new Date(Date.now() + h * 3_600_000).toISOString();

test("item 1: on a phone the header is one row and a slot opened from far down the board starts at its name", async () => {
  for (const [lang, size] of WAYS) {
    const page = await open("/", { lang, size, selector: "[data-testid=slot-card]" });
    const header = await page.locator("header.top").boundingBox();
    if (size === "phone") {
      // One row (it was three: 147 px, 17 % of the screen).
      assert.ok(header.height <= 64, `${lang}: the phone header is ${header.height} px high`);
      assert.equal(await page.locator("header nav").isVisible(), false, "the navigation is folded on a phone");
      const toggle = page.getByTestId("menu-toggle");
      assert.equal(await toggle.getAttribute("aria-expanded"), "false");
      await toggle.click();
      assert.equal(await toggle.getAttribute("aria-expanded"), "true");
      await page.locator("header nav a[href='#/jobs']").click();
      await page.waitForSelector("[data-testid=jobs-page], h1");
      // A route change folds the menu again.
      await page.waitForFunction(() => document.querySelector("[data-testid=menu-toggle]")?.getAttribute("aria-expanded") === "false");
      await page.goto(appUrl(server, "/"));
      await page.waitForSelector("[data-testid=slot-card]");
    } else {
      assert.equal(await page.locator("header nav").isVisible(), true, "the navigation shows on a desktop");
      assert.equal(await page.getByTestId("menu-toggle").isVisible(), false);
    }
    // The last card on the board: the page is scrolled far down to reach it.
    const last = page.locator("[data-testid=slot-card] a.card-title").last();
    const name = await last.textContent();
    await last.scrollIntoViewIfNeeded();
    assert.ok((await page.evaluate(() => window.scrollY)) > 0 || size === "desktop", "the board was scrolled");
    await last.click();
    await page.waitForSelector(`#slot-title:text-is("${name}")`);
    const top = (await page.locator("header.top").boundingBox()).height;
    const title = await page.locator("#slot-title").boundingBox();
    const badge = await page.getByTestId("slot-lifecycle").boundingBox();
    assert.ok(title.y >= top, `${lang} ${size}: the slot's name is at ${title.y}, under the ${top} px header`);
    assert.ok(badge.y >= top && badge.y + badge.height <= SIZES[size].height, `${lang} ${size}: the state badge is on screen`);
    await done(page, "slot-arrival", lang, size);
  }
});

/** resetOne occupies a vacant slot, releases it and returns {id, slot}; the job runs after the 3 s grace. */
async function resetOne() {
  const vacant = (await slots()).find((s) => s.lifecycle === "vacant" && !s.active_job);
  assert.ok(vacant, "a vacant slot to reset");
  await server.api("POST", `/api/slots/${vacant.name}/occupy`, { by: ME, until: inHours(2) });
  const { job_id: id } = await server.api("POST", `/api/slots/${vacant.name}/release`, { reason: "e2e: a reset to look at" });
  return { id, slot: vacant.name };
}

let succeeded; // a reset that succeeded: { id, slot }

test("item 4: the job page shows and copies its id, labels the correlation id, counts the grace apart from the run, and no step took 0s", async () => {
  succeeded = await resetOne();
  await browser.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
  for (const [lang, size] of WAYS) {
    const page = await open(`/jobs/${succeeded.id}`, { lang, size, selector: "[data-testid=job-page]" });
    await page.waitForSelector('[data-testid=job-page][data-state="succeeded"]', { timeout: 120_000 });
    assert.match(await page.getByTestId("job-id").textContent(), new RegExp(succeeded.id));
    const corr = page.getByTestId("job-correlation");
    if ((await corr.count()) > 0) {
      const label = await page.locator("dl.job-ids dt").nth(1).textContent();
      assert.match(label, lang === "en" ? /Correlation id/ : /상관관계 ID/);
    }
    const timing = await page.getByTestId("job-timing").textContent();
    assert.match(timing, lang === "en" ? /^Waited 3(\.\d)?s in the grace period · (.* in the queue · )?ran \d/ : /^유예 시간 3(\.\d)?초 대기 · /);
    for (const took of await page.getByTestId("tl-took").allTextContents()) {
      assert.doesNotMatch(took, /^(0s|0초)$/, `a measured step reads ${took}`);
    }
    // No Go duration anywhere on the page.
    assert.doesNotMatch(await page.locator("main").textContent(), /\d+h\d+m\d+s|\d+m\d+s\b/);
    if (lang === "en" && size === "desktop") {
      await page.getByTestId("copy-job-id").click();
      await page.waitForFunction(() => document.querySelector("[data-testid=copy-job-id]")?.textContent !== "Copy");
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), succeeded.id, "the copy button copies the job id");
    }
    await done(page, "job-ids", lang, size);
  }
});

test("item 5: a finished reset, extend, occupy and promote each say Done where the person lands; a promote links the new repository", async () => {
  let r = await resetOne();
  for (const [lang, size] of WAYS) {
    // The wait view moves to the slot page on success, which says so.
    const page = await open(`/jobs/${r.id}/wait`, { lang, size, selector: "[data-testid=wait-view]" });
    await page.waitForSelector("[data-testid=slot-page] [data-testid=outcome]", { timeout: 120_000 });
    assert.match(await page.getByTestId("outcome").textContent(), lang === "en" ? new RegExp(`Done\\. The reset of ${r.slot} finished in [\\d.]+ ?(ms|s)`) : new RegExp(`완료\\. ${r.slot} 초기화가 `));
    // Occupy it again from the slot page, then extend: each says what it did.
    await page.getByTestId("occupy").click();
    await page.waitForFunction((lg) => /occupies|사용합니다/.test(document.querySelector("[data-testid=outcome]")?.textContent ?? "") && lg, lang);
    await page.getByTestId("extend").click();
    await page.waitForFunction(() => /deadline of .* is now|기한이 이제/.test(document.querySelector("[data-testid=outcome]")?.textContent ?? ""));
    await done(page, "outcome-slot", lang, size);
    // The next way follows the next reset of the same slot.
    const again = await server.api("POST", `/api/slots/${r.slot}/release`, { reason: "e2e: again" });
    r = { id: again.job_id, slot: r.slot };
  }
  // A promote's job page links the repository it made.
  const vacant = (await slots()).find((s) => s.lifecycle === "vacant" && !s.active_job);
  const { job_id: id } = await server.api("POST", `/api/slots/${vacant.name}/promote`, { project: "SLOT", name: `promoted-${vacant.name}` });
  for (const [lang, size] of WAYS) {
    const page = await open(`/jobs/${id}`, { lang, size, selector: "[data-testid=job-page]" });
    await page.waitForSelector('[data-testid=job-page][data-state="succeeded"] [data-testid=job-done]', { timeout: 120_000 });
    const done5 = page.getByTestId("job-done");
    assert.match(await done5.textContent(), new RegExp(`SLOT/promoted-${vacant.name}`));
    const href = await done5.locator("a[data-testid=resource-link]").getAttribute("href");
    assert.match(href ?? "", new RegExp(`/projects/SLOT/repos/promoted-${vacant.name}/browse$`), "the new repository is linked at the git host");
    await done(page, "outcome-promote", lang, size);
  }
});

test("item 7: the promote form has its heading, and a promote to an existing repository only says it exists", async () => {
  const s = (await slots()).find((v) => (v.lifecycle === "vacant" || v.lifecycle === "occupied") && !v.active_job);
  for (const [lang, size] of WAYS) {
    const page = await open(`/slots/${s.name}`, { lang, size, selector: "[data-testid=slot-page]" });
    assert.match(await page.locator("#promote-title").textContent(), lang === "en" ? /Promote to a new repository/ : /새 저장소로 승격/);
    await page.locator(".promote-form input").nth(0).fill(s.repo.project);
    await page.locator(".promote-form input").nth(1).fill(s.repo.slug);
    await page.getByTestId("promote").click();
    await page.waitForSelector('[data-testid=plan-target][data-state="exists"]', { timeout: 20_000 });
    const dialog = await page.locator("dialog").textContent();
    assert.doesNotMatch(dialog, lang === "en" ? /Created/ : /생성됨|만들어짐/, "nothing is listed as created when the target exists");
    assert.equal(await page.getByTestId("confirm").isDisabled(), true);
    await done(page, "promote-exists", lang, size);
  }
});

test("item 6: a failure leads with one translated sentence and what to do, the chain under Details, Resume on the first screen", async () => {
  const vacant = (await slots()).filter((s) => s.lifecycle === "vacant" && !s.active_job).at(-1);
  assert.ok(vacant, "a vacant slot for the failing reset");
  await server.api("POST", `/api/slots/${vacant.name}/occupy`, { by: "fault-victim", until: inHours(5) });
  const f = await server.api("POST", "/api/sim/faults", { endpoint: "coolify.DeleteStorage", status: 403, times: 1 });
  const { job_id: id } = await server.api("POST", `/api/slots/${vacant.name}/release`, { reason: "e2e: a reset that fails" });
  try {
    for (const [lang, size] of WAYS) {
      for (const [route, name] of [
        [`/jobs/${id}`, "failure-job"],
        [`/jobs/${id}/wait`, "failure-wait"],
        [`/slots/${vacant.name}`, "failure-slot"],
      ]) {
        const page = await open(route, { lang, size });
        await page.waitForSelector("[data-testid=failure-sentence]", { timeout: 120_000 });
        const sentence = await page.getByTestId("failure-sentence").first().textContent();
        if (route.startsWith("/jobs")) {
          // Worded from the failure's code (StepFailed.error_code: provider, problem forbidden), not from the status alone.
          assert.match(sentence, lang === "en" ? /Reset stopped at “Delete volumes”: the API token is not allowed to do this \(Coolify, HTTP 403\)\./ : /초기화 작업이 “.+” 단계에서 멈췄습니다: API 토큰에 이 작업 권한이 없습니다 \(Coolify, HTTP 403\)\./);
          // The raw chain is there, folded.
          const details = page.getByTestId("failure-details").first();
          assert.equal(await details.getAttribute("open"), null, "the error chain is folded under the provider's message");
          assert.match(await details.locator("summary").textContent(), lang === "en" ? /^The provider's message$/ : /^제공자의 메시지 \(영어 원문\)$/);
        }
        assert.doesNotMatch(sentence, /coolify\.|DELETE |\/api\/v1|[0-9a-f]{8}-[0-9a-f]{4}/, `${lang}: no operation name or id in the sentence: ${sentence}`);
        if (lang === "ko") assert.doesNotMatch(sentence, /\b(failed|refused|forbidden|error)\b/i, "no English inside the Korean sentence");
        assert.match(await page.getByTestId("failure-todo").first().textContent(), lang === "en" ? /^What to do: / : /^할 일: /);
        const resume = await page.getByTestId("resume").first().boundingBox();
        assert.ok(resume && resume.y + resume.height <= SIZES[size].height, `${name} ${lang} ${size}: Resume is on the first screen (at ${resume?.y})`);
        await done(page, name, lang, size);
      }
    }
  } finally {
    await server.api("DELETE", `/api/sim/faults/${f.id}`).catch(() => undefined);
  }
});

test("item 10: Korean pages choose particles, name the server's own actors in words, and use no 고아 jargon", async () => {
  // A deadline change by the server's own timer puts "system:deadline" in the audit log.
  const pages = ["/audit", `/jobs/${succeeded?.id ?? ""}`, "/reconcile", "/", "/jobs"];
  for (const [lang, size] of WAYS) {
    for (const route of pages) {
      const page = await open(route, { lang, size });
      await page.waitForSelector("main h1", { timeout: 20_000 });
      await page.waitForLoadState("networkidle");
      const text = await page.locator("main").textContent();
      assert.doesNotMatch(text, /system:\w+/, `${route} ${lang}: a server actor shown as its id`);
      if (lang === "ko") assert.doesNotMatch(text, /을\(를\)|이\(가\)|은\(는\)|\(으\)로|고아/, `${route}: a particle pair or jargon on the Korean page`);
      if (route.startsWith("/jobs/") && lang === "ko") assert.match(text, /작업 수령/, "a worker's claim is not 점유 (occupancy)");
      if (size === "phone" && route === "/audit") await done(page, "audit-words", lang, size);
      else await page.close();
    }
  }
});

test("item 12: an admin's Simulator page lists, injects and clears faults through the simulators' control API", async () => {
  for (const [lang, size] of WAYS) {
    const page = await open("/simulator", { lang, size, selector: '[data-testid=sim-page][data-available="true"]' });
    if (size === "desktop") assert.equal(await page.getByTestId("nav-simulator").count(), 1, "admins get the Simulator link");
    await page.waitForSelector("[data-testid=sim-none]");
    await page.selectOption("[data-testid=sim-endpoint]", "coolify.DeleteStorage");
    await page.selectOption("[data-testid=sim-effect]", "403");
    await page.getByTestId("sim-inject").click();
    await page.waitForSelector('[data-testid=sim-fault][data-endpoint="coolify.DeleteStorage"]');
    const { faults } = await server.api("GET", "/api/sim/faults");
    assert.ok(faults.some((f) => f.endpoint === "coolify.DeleteStorage" && f.status === 403 && f.times === 1), JSON.stringify(faults));
    assert.match(await page.getByTestId("sim-fault").first().textContent(), lang === "en" ? /Answer HTTP 403 · coolify\.DeleteStorage \(Delete volumes\)/ : /HTTP 403 응답/);
    await shot(page, `dash3-simulator-${lang}-${size}`);
    await expectNoSeriousViolations(page, `simulator ${lang} ${size}`);
    await page.getByTestId("sim-clear").first().click();
    await page.waitForSelector("[data-testid=sim-none]");
    assert.equal(((await server.api("GET", "/api/sim/faults")).faults ?? []).length, 0, "cleared at the simulator");
    await page.close();
  }
});

test("item 11: the tab shows the page and a job's state, dark mode follows the system, shortcuts, a not-found page links back", async () => {
  for (const [lang, size] of WAYS) {
    // The job's state in the title and the favicon.
    const page = await open(`/jobs/${succeeded.id}`, { lang, size, selector: '[data-testid=job-page][data-state="succeeded"]' });
    await page.waitForFunction(() => document.title.startsWith("✓ "));
    assert.equal(await page.locator("link[rel=icon]").getAttribute("data-state"), "ok");
    // The icon is the dashboard's own file: a data: URL is refused by the CSP (default-src 'self').
    const href = await page.locator("link[rel=icon]").getAttribute("href");
    assert.match(href ?? "", /tab-ok\.svg$/);
    assert.match((await page.evaluate(async (h) => (await fetch(h)).headers.get("content-type"), href)) ?? "", /svg/);
    // "g j" goes to the jobs page, whose tab is named after it; "/" focuses its search box (if any).
    await page.locator("body").click({ position: { x: 1, y: 300 } });
    await page.keyboard.press("g");
    await page.keyboard.press("j");
    await page.waitForFunction(() => location.hash === "#/jobs");
    await page.waitForFunction((l) => document.title === (l === "en" ? "Jobs · Slotkeeper" : "작업 · Slotkeeper"), lang);
    await page.keyboard.press("g");
    await page.keyboard.press("b");
    await page.waitForSelector("[data-testid=slot-card]");
    await page.keyboard.press("/");
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("type")), "search", "/ focuses the board's filter");
    // A job that does not exist: says so and links back.
    await page.goto(appUrl(server, "/jobs/00000000-0000-0000-0000-000000000000"));
    await page.waitForSelector("[data-testid=not-found] a[href='#/']");
    await done(page, "not-found", lang, size);
  }
  // Dark mode: the system's choice is followed, and axe still finds nothing serious.
  for (const route of ["/", `/jobs/${succeeded.id}`, "/simulator"]) {
    const page = await open(route, { size: "desktop" });
    await page.emulateMedia({ colorScheme: "dark" });
    await page.waitForSelector("main h1");
    const bg = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    // The tokens' dark value (issue 35: Radix Colors' dark slate), whatever its exact step: a dark page.
    const [r, g, b] = bg.match(/\d+/g).map(Number);
    assert.ok(r + g + b < 3 * 40, `dark background under prefers-color-scheme: dark, got ${bg}`);
    await done(page, `dark${route.replace(/\W+/g, "-")}`, "en", "desktop");
  }
});
