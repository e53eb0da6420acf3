// The tab's title and favicon follow the page and its state (issue 27 item
// 11, as GitHub Actions and Vercel do): "▶ Reset of dune · Slotkeeper" with
// a blue dot while a job runs, "✗ …" with a red one when it failed, "✓ …"
// green when it succeeded, a plain title and grey dot elsewhere.
import { useEffect } from "react";

export type TabState = "running" | "failed" | "ok" | "none";

const MARK: Record<TabState, string> = { running: "▶ ", failed: "✗ ", ok: "✓ ", none: "" };

// The icons are files of the dashboard itself (frontend/public/tab-*.svg:
// blue, red, green and grey dots), not data: URLs, which the server's
// Content-Security-Policy (default-src 'self') rightly blocks.
function icon(state: TabState): string {
  return `./tab-${state}.svg`;
}

/** setTab sets the document's title and favicon. */
export function setTab(title: string, state: TabState = "none"): void {
  if (typeof document === "undefined") return;
  document.title = `${MARK[state]}${title ? `${title} · ` : ""}Slotkeeper`;
  let link = document.querySelector<HTMLLinkElement>("link[rel=icon]");
  if (!link) {
    link = document.createElement("link");
    link.rel = "icon";
    document.head.appendChild(link);
  }
  link.dataset.state = state;
  link.href = icon(state);
}

/** jobTabState is a job state as the tab shows it. */
export function jobTabState(state: string): TabState {
  if (state === "queued" || state === "running") return "running";
  if (state === "succeeded") return "ok";
  return ["failed", "timed_out", "abandoned"].includes(state) ? "failed" : "none";
}

/** useTab keeps the tab's title and icon while a page shows. */
export function useTab(title: string, state: TabState = "none"): void {
  useEffect(() => setTab(title, state), [title, state]);
}
