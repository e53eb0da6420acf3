import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
const [src, out, y, h] = process.argv.slice(2);
const b = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--headless"] });
const p = await b.newPage({ viewport: { width: 390, height: Number(h) } });
await p.setContent(`<body style="margin:0"><img style="display:block;margin-top:-${y}px" src="data:image/png;base64,${readFileSync(src).toString("base64")}"></body>`);
await p.screenshot({ path: out });
await b.close();
