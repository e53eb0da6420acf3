import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { followSession } from "./auth/liveSession";
import { checkSession, installAuth } from "./auth/session";
import { readConfig } from "./live/config";
import { getLiveState } from "./live/store";
import { getStreamStatus, startStream } from "./live/stream";
import "./ui/tokens.css";
import "./styles.css";

// A 401 from any request shows the sign-in page.
installAuth();
// One stream per tab, started here (never by a component) once the tab is
// signed in, closed on sign-out, and opened again after the next sign-in.
const { heartbeatMs } = readConfig();
followSession((onRefused) => startStream({ heartbeatMs, onRefused }));
void checkSession(true);

// A read-only view of the live store for browser tests and support: it
// proves what the page knows (position, view versions) without scraping the DOM.
declare global {
  interface Window {
    __SLOTKEEPER__?: { snapshot: () => unknown };
  }
}
window.__SLOTKEEPER__ = {
  snapshot: () => {
    const s = getLiveState();
    return {
      position: s.position,
      stream: getStreamStatus(),
      slots: [...s.slots.values()].map((v) => ({ name: v.name, revision: v.revision, position: v.position, lifecycle: v.lifecycle, active_job: v.active_job })),
      jobs: [...s.jobs.values()].map((j) => ({ id: j.id, revision: j.revision, position: j.position, state: j.state, steps: j.steps })),
    };
  },
};

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
