// The tab's title and favicon follow the page and its state (issue 27 item
// 11, as GitHub Actions and Vercel do): "▶ Reset of dune · Slotkeeper" with
// a blue dot while a job runs, "✗ …" with a red one when it failed, "✓ …"
// green when it succeeded, a plain title and grey dot elsewhere.
import { useEffect } from "react";

export type TabState = "running" | "failed" | "ok" | "none";

const COLOUR: Record<TabState, string> = { running: "#0969da", failed: "#cf222e", ok: "#1a7f37", none: "#6e7781" };
const MARK: Record<TabState, string> = { running: "▶ ", failed: "✗ ", ok: "✓ ", none: "" };

function icon(state: TabState): string {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="${COLOUR[state]}"/></svg>`;
  return `data:image/svg+xml,${encodeURIComponent(svg)}`;
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
