import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { getLang, setLang } from "./i18n";
import { readConfig } from "./live/config";
import { startStream } from "./live/stream";
import "./styles.css";

setLang(getLang());
// One stream per tab, started once here and never by a component.
startStream({ heartbeatMs: readConfig().heartbeatMs });

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
