// Debian's Chromium driven by playwright-core, one fresh profile per test.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";

export const ARTIFACTS = resolve(import.meta.dirname, "..", "artifacts");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

/** openBrowser launches Chromium with a fresh user-data-dir and returns {context, close}. */
export async function openBrowser(opts = {}) {
  const profile = mkdtempSync(join(tmpdir(), "slotkeeper-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
    viewport: opts.viewport ?? { width: 1366, height: 900 },
    locale: opts.locale ?? "en-US",
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** shot saves a screenshot of the page under e2e/artifacts/. */
export async function shot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/**
 * debugState reads the dashboard's live store (exposed read-only on
 * window.__SLOTKEEPER__ for tests and support).
 */
export function debugState(page) {
  return page.evaluate(() => window.__SLOTKEEPER__.snapshot());
}
