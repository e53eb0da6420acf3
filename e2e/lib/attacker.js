// A second loopback origin for cross-origin attack tests: a tiny HTTP
// server on another port whose pages try to change state on the victim
// server with the victim browser's cookies, the way a malicious page a
// team member opens would. Each page sets document.title to "sent" once
// its request has gone out (or the form has been submitted).
import { createServer, request } from "node:http";
import { freePort } from "./server.js";

const esc = (s) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");

/** pages maps a path to the HTML the attacker serves; target is the victim's origin. */
function page(target, url) {
  const slot = url.searchParams.get("slot") ?? "";
  const action = `${target}/api/slots/${encodeURIComponent(slot)}/${url.searchParams.get("cmd") ?? "teardown"}`;
  switch (url.pathname) {
    case "/form-empty":
      // An empty form POST: no body, urlencoded type (the old server skipped
      // the Content-Type check for an empty body).
      return `<form id="f" method="POST" action="${esc(action)}"></form><script>document.title="sent";f.submit()</script>`;
    case "/form-json":
      // The text/plain trick: the body reads as JSON {"x":"=\"}"} to a lax parser.
      return `<form id="f" method="POST" enctype="text/plain" action="${esc(action)}"><input type="hidden" name='{"reason":"pwned","x":"' value='"}'></form><script>document.title="sent";f.submit()</script>`;
    case "/nocors": {
      const body = url.searchParams.get("body") ?? "{}";
      return `<script>
fetch(${JSON.stringify(action)}, {
  mode: "no-cors", method: "POST", credentials: "include",
  body: new Blob([${JSON.stringify(body)}], { type: "application/json" }),
}).then(() => { document.title = "sent"; }, (e) => { document.title = "sent:" + e; });
</script>`;
    }
    default:
      return "<p>nothing here</p>";
  }
}

export class Attacker {
  constructor(target) {
    this.target = target;
    this.http = undefined;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    this.port = await freePort();
    this.http = createServer((req, res) => {
      const html = page(this.target, new URL(req.url, this.url));
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      res.end(`<!doctype html><title>attack</title>${html}`);
    });
    await new Promise((res, rej) => {
      this.http.once("error", rej);
      this.http.listen(this.port, "127.0.0.1", res);
    });
    return this;
  }

  /** href is the URL of an attack page. */
  href(path, params) {
    return `${this.url}${path}?${new URLSearchParams(params)}`;
  }

  close() {
    return new Promise((res) => (this.http ? this.http.close(res) : res()));
  }
}

/**
 * RecordingProxy forwards HTTP to the victim server and records every
 * request's method, path and headers as the server receives them, so a
 * test can prove what the browser really sent (its cookie, Origin,
 * Sec-Fetch-Site, Content-Type) — Chromium does not report the cookie of
 * a no-cors fetch to Playwright. It listens on another port of the same
 * loopback address: the same site for cookies, as the server itself.
 */
export class RecordingProxy {
  constructor(targetPort) {
    this.targetPort = targetPort;
    this.requests = [];
    this.http = undefined;
    this.waiters = new Set();
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** answered resolves with the first recorded request (from index `from`) that matches and has its answer. */
  answered(pred, from = 0, timeoutMs = 15_000) {
    const find = () => this.requests.slice(from).find((r) => r.status > 0 && pred(r));
    const hit = find();
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const w = () => {
        const r = find();
        if (r) {
          clearTimeout(timer);
          this.waiters.delete(w);
          resolve(r);
        }
      };
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(new Error(`no matching request answered within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(w);
    });
  }

  async start() {
    this.port = await freePort();
    this.http = createServer((req, res) => {
      const seen = { method: req.method, path: req.url, headers: { ...req.headers }, status: 0, body: "" };
      this.requests.push(seen);
      const up = request(
        { host: "127.0.0.1", port: this.targetPort, method: req.method, path: req.url, headers: req.headers },
        (ur) => {
          seen.status = ur.statusCode;
          const chunks = [];
          ur.on("data", (c) => chunks.push(c));
          ur.on("end", () => {
            const buf = Buffer.concat(chunks);
            seen.body = buf.toString("utf8").slice(0, 2000);
            res.writeHead(ur.statusCode, ur.headers);
            res.end(buf);
            for (const w of [...this.waiters]) w();
          });
        },
      );
      up.on("error", () => {
        res.writeHead(502);
        res.end();
      });
      req.pipe(up);
    });
    await new Promise((res, rej) => {
      this.http.once("error", rej);
      this.http.listen(this.port, "127.0.0.1", res);
    });
    return this;
  }

  close() {
    return new Promise((res) => (this.http ? this.http.close(res) : res()));
  }
}
