// Starts the real `bin/slotkeeper serve` on a temp data dir and a free
// loopback port, and stops or restarts it on the same data. Nothing here
// sleeps to wait for something: readiness is polled on /readyz with a
// bounded deadline, and exit is awaited on the process's own event.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "..", "..");
export const BIN = process.env.SLOTKEEPER_BIN ?? join(ROOT, "bin", "slotkeeper");

/** freePort asks the kernel for an unused loopback port. */
export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

let helpText;
/** serveHelp is `slotkeeper serve --help` (flags differ while the server grows). */
export function serveHelp() {
  if (helpText === undefined) {
    // Go's flag package prints the usage to stderr and exits 0 or 2.
    const r = spawnSync(BIN, ["serve", "--help"], { encoding: "utf8", timeout: 10_000 });
    helpText = `${r.stdout ?? ""}${r.stderr ?? ""}`;
  }
  return helpText;
}

/** supports reports whether `serve` has a flag. */
export function supports(flag) {
  return new RegExp(`(^|\\s)-{1,2}${flag}\\b`, "m").test(serveHelp());
}

/**
 * Server is one `slotkeeper serve` process. opts.flags maps flag names to
 * values; a flag the binary does not have is left out and recorded in
 * `skippedFlags`, so a test can say what it could not configure.
 */
export class Server {
  constructor(opts = {}) {
    this.dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "slotkeeper-e2e-"));
    this.ownsData = opts.dataDir === undefined;
    this.flags = opts.flags ?? {};
    this.skippedFlags = [];
    this.proc = undefined;
    this.port = opts.port;
    this.log = [];
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    if (!existsSync(BIN)) throw new Error(`${BIN} not found: run \`make build\` first`);
    this.port ??= await freePort();
    const args = ["serve", "--data", this.dataDir, "--addr", `127.0.0.1:${this.port}`];
    this.skippedFlags = [];
    for (const [k, v] of Object.entries(this.flags)) {
      if (!supports(k)) this.skippedFlags.push(k);
      else if (typeof v === "boolean") args.push(`--${k}=${v}`);
      else args.push(`--${k}`, String(v));
    }
    const proc = spawn(BIN, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    this.proc = proc;
    this.exited = new Promise((res) => proc.once("exit", (code, signal) => res({ code, signal })));
    for (const s of [proc.stdout, proc.stderr]) {
      s.setEncoding("utf8");
      s.on("data", (d) => {
        this.log.push(d);
        if (this.log.length > 2000) this.log.splice(0, 1000);
      });
    }
    await this.waitReady(30_000);
    return this;
  }

  /** waitReady polls /readyz until it answers 200 or the deadline passes. */
  async waitReady(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < deadline) {
      const early = await Promise.race([this.exited, new Promise((r) => setTimeout(() => r(undefined), 100))]);
      if (early) throw new Error(`slotkeeper exited during start (${JSON.stringify(early)}):\n${this.log.join("").slice(-3000)}`);
      try {
        const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(1000) });
        if (r.ok) return;
        last = `readyz ${r.status}`;
      } catch (e) {
        last = String(e);
      }
    }
    throw new Error(`slotkeeper not ready after ${timeoutMs} ms (${last}):\n${this.log.join("").slice(-3000)}`);
  }

  /** stop sends SIGTERM (graceful shutdown) and waits for the exit. */
  async stop(signal = "SIGTERM") {
    if (!this.proc) return;
    const proc = this.proc;
    proc.kill("SIGCONT"); // in case a test paused it
    this.proc = undefined;
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    const res = await Promise.race([this.exited, new Promise((r) => setTimeout(() => r(undefined), 15_000))]);
    if (!res) {
      proc.kill("SIGKILL");
      await this.exited;
    }
  }

  /** pause freezes the process (SIGSTOP): connections stay open but go silent, like a half-open link. */
  pause() {
    this.proc?.kill("SIGSTOP");
  }

  /** resume continues a paused process (SIGCONT). */
  resume() {
    this.proc?.kill("SIGCONT");
  }

  /** close stops the server and removes its data dir. */
  async close() {
    await this.stop();
    if (this.ownsData) rmSync(this.dataDir, { recursive: true, force: true });
  }

  /**
   * api calls the REST API and returns the parsed JSON (throws on non-2xx).
   * With `this.token` set (lib/auth.js prepareAuth) it is sent as a bearer
   * token; state changes always carry JSON (`{}` when there is no body).
   */
  async api(method, path, body) {
    const headers = { "Content-Type": "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    const r = await fetch(this.url + path, {
      method,
      headers,
      body: body === undefined ? (method === "GET" ? undefined : "{}") : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path} → ${r.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }
}
