// Runtime configuration of the dashboard. The heartbeat interval must match
// the server's `--heartbeat`; it can be set by the page URL
// (`?heartbeat_ms=1000`, used by the e2e tests) or by a global
// `window.SLOTKEEPER_CONFIG = { heartbeatMs }` injected by whoever serves
// the page. Default 15 s, the server's default.

export const DEFAULT_HEARTBEAT_MS = 15_000;

export interface AppConfig {
  heartbeatMs: number;
}

declare global {
  interface Window {
    SLOTKEEPER_CONFIG?: Partial<AppConfig>;
  }
}

function positive(n: unknown): number | undefined {
  const v = typeof n === "string" ? Number(n) : n;
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : undefined;
}

export function readConfig(win: Window = window): AppConfig {
  const fromUrl = positive(new URLSearchParams(win.location.search).get("heartbeat_ms") ?? undefined);
  const fromGlobal = positive(win.SLOTKEEPER_CONFIG?.heartbeatMs);
  return { heartbeatMs: fromUrl ?? fromGlobal ?? DEFAULT_HEARTBEAT_MS };
}
