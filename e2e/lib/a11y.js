// Accessibility and layout checks any browser test can call: axe-core run
// inside the page, a 390 px overflow check, and keyboard reachability.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

/**
 * axeViolations runs axe-core (WCAG 2.x A and AA rules) on the page as it
 * stands and returns the violations of the given impacts. The script is
 * evaluated over the DevTools protocol, so the page's CSP does not block it.
 */
export async function axeViolations(page, { impacts = ["serious", "critical"] } = {}) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, {
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] },
      resultTypes: ["violations"],
    });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(" ")}: ${n.failureSummary?.split("\n").slice(1).join(" ").trim()}`),
    }));
  });
  return found.filter((v) => impacts.includes(v.impact));
}

/** expectNoSeriousViolations fails the test with axe's findings, named by where they were found. */
export async function expectNoSeriousViolations(page, where) {
  const v = await axeViolations(page);
  assert.deepEqual(v, [], `${where}: axe found serious or critical violations:\n${JSON.stringify(v, null, 2)}`);
}

/**
 * overflowing lists the elements that stick out past the right edge of the
 * viewport (a phone user would have to scroll sideways). Content inside a
 * container that scrolls or clips on its own (a wide table's wrapper) is
 * not counted, nor is what is visually hidden for screen readers.
 */
export function overflowing(page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const out = [];
    const contained = (el) => {
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        const o = getComputedStyle(p).overflowX;
        if (o === "auto" || o === "scroll" || o === "hidden" || o === "clip") return true;
      }
      return false;
    };
    for (const el of document.body.querySelectorAll("*")) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0 || r.right <= vw + 1) continue;
      if (el.closest(".sr-only, .skip") || contained(el)) continue;
      const id = el.getAttribute("data-testid");
      out.push(`${el.tagName.toLowerCase()}${id ? `[data-testid=${id}]` : ""}${el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : ""} right=${Math.round(r.right)} > ${vw}`);
    }
    if (document.documentElement.scrollWidth > vw + 1) out.push(`document scrollWidth ${document.documentElement.scrollWidth} > ${vw}`);
    return out;
  });
}

/**
 * tabTo presses Tab from the top of the page until the element matching
 * selector has the focus, and returns how many presses it took; it fails
 * after max presses (the element is not reachable by keyboard).
 */
export async function tabTo(page, selector, max = 80) {
  await page.evaluate(() => {
    document.activeElement?.blur?.();
    window.scrollTo(0, 0);
  });
  for (let i = 1; i <= max; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((sel) => !!document.activeElement?.matches(sel), selector)) return i;
  }
  assert.fail(`${selector} is not reachable with Tab within ${max} presses`);
}
