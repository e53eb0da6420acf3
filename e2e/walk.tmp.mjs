import { openBrowser } from "./lib/browser.js";
const base = "http://127.0.0.1:18080";
const out = "/tmp/walk/shots";
import { mkdirSync } from "node:fs";
mkdirSync(out, { recursive: true });
const b = await openBrowser();
const page = await b.context.newPage();
const errors = [];
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
await page.goto(base + "/");
await page.waitForSelector("[data-testid=whoami]", { state: "attached", timeout: 20000 });
await page.screenshot({ path: `${out}/board-en-desktop.png`, fullPage: true });
// release an occupied slot through the UI API (same origin, with the CSRF cookie the page uses)
const slots = await page.evaluate(async () => (await (await fetch("/api/slots")).json()).slots.map((s) => [s.name, s.lifecycle]));
console.log("slots", JSON.stringify(slots));
const occ = slots.find(([, l]) => l === "occupied")[0];
await page.goto(base + `/#/slots/${occ}`);
await page.waitForSelector("#slot-title");
await page.screenshot({ path: `${out}/slot-before-en.png`, fullPage: true });
const rel = page.locator("[data-testid=release]").first();
if (await rel.count()) {
  await rel.click();
  const confirm = page.locator("[data-testid=confirm-release], [data-testid=confirm], button:has-text('Release')").last();
  await page.waitForTimeout(300);
  await page.screenshot({ path: `${out}/release-dialog-en.png`, fullPage: true });
  await page.fill("[data-testid=release-reason]", "newcomer walk");
  await page.click("[data-testid=confirm]");
}
await page.waitForTimeout(9000);
await page.screenshot({ path: `${out}/after-release-en.png`, fullPage: true });
await page.goto(base + `/#/slots/${occ}`);
await page.waitForSelector("#slot-title");
await page.waitForTimeout(500);
await page.screenshot({ path: `${out}/slot-after-en.png`, fullPage: true });
await page.goto(base + "/#/admin");
await page.waitForSelector("[data-testid=consumers-panel]");
await page.screenshot({ path: `${out}/admin-en.png`, fullPage: true });
for (const [w, h, tag] of [[390, 844, "phone"], [1366, 900, "desktop"]]) {
  await page.setViewportSize({ width: w, height: h });
  for (const lang of ["en", "ko"]) {
    await page.evaluate((l) => localStorage.setItem("slotkeeper.lang", l), lang);
    for (const [route, name] of [["/", "board"], [`/slots/${occ}`, "slot"], ["/admin", "admin"], ["/simulator", "sim"]]) {
      await page.goto(base + "/#" + route);
      await page.reload();
      await page.waitForTimeout(700);
      await page.screenshot({ path: `${out}/${name}-${lang}-${tag}.png`, fullPage: true });
    }
  }
}
console.log("console errors", JSON.stringify(errors));
await b.close();
