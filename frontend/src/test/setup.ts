import { cleanup, configure } from "@testing-library/react";
import { afterEach, beforeAll, vi } from "vitest";

// waitFor and findBy* wait for the DOM (a MutationObserver), by default
// for at most a second: a render on a loaded machine has taken longer. The
// bound is one only a state that never comes reaches (issue 36 item 7).
configure({ asyncUtilTimeout: 15_000 });

// The app's stores, loaded once per test file after the file itself has
// loaded: a static import here would load them before the file's own
// vi.mock (contract.test.ts mocks ../services/http, which the session
// store imports), and the file would get the unmocked module.
let app: Awaited<ReturnType<typeof loadApp>>;
async function loadApp() {
  const [links, session, i18n, announce, clock, health, observable, outcome, store, ticker] = await Promise.all([
    import("../auth/links"),
    import("../auth/session"),
    import("../i18n"),
    import("../live/announce"),
    import("../live/clock"),
    import("../live/health"),
    import("../live/observable"),
    import("../live/outcome"),
    import("../live/store"),
    import("../live/ticker"),
  ]);
  return { ...links, ...session, ...i18n, ...announce, ...clock, ...health, ...observable, ...outcome, ...store, ...ticker };
}
beforeAll(async () => {
  app = await loadApp();
});

// The real timer functions, to check none is left replaced after a test.
const realSetInterval = globalThis.setInterval;

// The one teardown every test file gets: the app keeps its state in
// modules (one store per concern, shared by every component), and a test
// that leaves any of it changed would decide the next test's outcome.
// A file keeps its own afterEach only for what is its own (a stream it
// started, a subscription it holds). That runs before this one (hooks run
// as a stack), so a file whose own teardown must follow the unmount calls
// cleanup() itself first (WaitView, WaitlistPage: a mounted page reacts to
// the stream stopping); a second cleanup() here is a no-op.
afterEach(() => {
  // Unmount first, while a test's fake timers are still installed: the
  // components' effect cleanups unsubscribe from the stores below and clear
  // their timeouts on the clock that made them.
  cleanup();
  // The one global ticker: its interval (cleared on the clock that made
  // it, so before useRealTimers) and its subscribers.
  app.stopTicker();
  // Session: signed-in state, CSRF token, 401 and stale-CSRF handlers.
  app.resetAuth();
  // Provider web roots and engine limits from the signed-in answer.
  app.setProviderLinks(undefined);
  app.setJobLimits(undefined);
  // Live read models fed by the stream and REST loads.
  app.resetLiveStore();
  // Failing sources behind the connection banner.
  app.resetHealth();
  // The learned server-clock offset (after stopTicker: nothing ticks on it).
  app.resetClock();
  // A command's outcome left for the page it lands on, and the live region's text.
  app.resetOutcome();
  app.resetAnnouncement();
  // The language (also written to localStorage and <html lang>).
  app.setLang("en");
  // The address: hash routes and the audit page's query (replaceState fires no event).
  window.history.replaceState(null, "", "/");
  // Spies before timers: a spy on a faked setInterval restores the fake,
  // which useRealTimers then replaces with the real one.
  vi.restoreAllMocks();
  vi.useRealTimers();
  // fetch, EventSource and the like stubbed by the test.
  vi.unstubAllGlobals();

  if (globalThis.setInterval !== realSetInterval) {
    throw new Error("a test left setInterval replaced (a spy on a fake timer restored after the fake clock was removed?)");
  }
  // A store the resets above do not cover (a new one, or a reset that
  // misses a field) fails the test that left it changed.
  const away = app.storesAwayFromStart((a, b) => canonical(a) === canonical(b));
  if (away.length > 0) {
    throw new Error(`a module-level store was left changed after the test; reset it in src/test/setup.ts: ${away.map((a) => `${a.where}: ${canonical(a.value)}`).join("; ")}`);
  }
});

/**
 * canonical writes a store's value for comparison: JSON with Maps and Sets
 * as their entries (the stores hold plain data, Maps and Sets). Not
 * expect().toEqual: an expect here would count towards the test's own
 * expect.assertions.
 */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (x instanceof Map ? { Map: [...x.entries()] } : x instanceof Set ? { Set: [...x] } : x)) ?? "undefined";
}
