#!/usr/bin/env bash
# Builds the dashboard and prints its initial JS size, gzip-compressed
# (target ≤ 150 KB), against a baseline measured in the same run: the bare
# React + ReactDOM runtime bundled the same way, so the ratio shows what the
# app itself adds.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d node_modules ] || npm ci --no-audit --no-fund >/dev/null
npm run build --workspace frontend >/dev/null 2>&1 || { echo "frontend build failed"; npm run build --workspace frontend; exit 1; }

node --input-type=module - <<'JS'
import { readFileSync, mkdtempSync, writeFileSync, rmSync, readdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { join } from "node:path";
import { build } from "vite";

const dist = "frontend/dist";
const html = readFileSync(join(dist, "index.html"), "utf8");
// Initial JS: the module scripts index.html loads, plus their modulepreloads.
const srcs = [...html.matchAll(/<(?:script[^>]*\ssrc|link[^>]*rel="modulepreload"[^>]*\shref)="\.?\/?([^"]+\.js)"/g)].map((m) => m[1]);
let raw = 0, gz = 0;
for (const s of srcs) {
  const b = readFileSync(join(dist, s));
  raw += b.length;
  gz += gzipSync(b, { level: 9 }).length;
}

// Baseline: React + ReactDOM alone, built by the same Vite.
// Inside node_modules (ignored by git) so that "react" resolves from the workspace.
const dir = mkdtempSync(join(process.cwd(), "node_modules", ".sk-bench-"));
writeFileSync(join(dir, "index.html"), '<div id="r"></div><script type="module" src="./main.js"></script>');
writeFileSync(join(dir, "main.js"), 'import { createRoot } from "react-dom/client"; import { createElement } from "react"; createRoot(document.getElementById("r")).render(createElement("p", null, "hi"));');
await build({ root: dir, logLevel: "silent", configFile: false, build: { outDir: join(dir, "out") }, cacheDir: join(dir, ".vite") });
let base = 0;
for (const f of readdirSync(join(dir, "out", "assets")).filter((f) => f.endsWith(".js"))) {
  base += gzipSync(readFileSync(join(dir, "out", "assets", f)), { level: 9 }).length;
}
rmSync(dir, { recursive: true, force: true });

const kb = (n) => (n / 1024).toFixed(1);
console.log(`frontend initial JS: ${srcs.length} file(s), ${kb(raw)} KB raw, ${kb(gz)} KB gzip (target <= 150 KB: ${gz <= 150 * 1024 ? "ok" : "OVER"})`);
console.log(`baseline React+ReactDOM alone: ${kb(base)} KB gzip; app/baseline ratio ${(gz / base).toFixed(2)}x`);
JS
