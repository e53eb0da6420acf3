import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { readConfig } from "./live/config";
import { getLiveState } from "./live/store";
import { getStreamStatus, startStream } from "./live/stream";
import "./styles.css";

// One stream per tab, started once here and never by a component.
startStream({ heartbeatMs: readConfig().heartbeatMs });

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
