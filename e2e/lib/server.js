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

let adminCommand;
/** hasAdminCommand reports whether the binary has `slotkeeper admin` (sign-in exists). */
export function hasAdminCommand() {
  if (adminCommand === undefined) {
    const r = spawnSync(BIN, ["help"], { encoding: "utf8", timeout: 10_000 });
    adminCommand = /^\s+admin\b/m.test(r.stdout ?? "");
  }
  return adminCommand;
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
    // token is an admin API token created on the data dir before the first
    // start (opts.token === false: none), sent by api().
    this.wantToken = opts.token !== false;
    this.token = undefined;
  }

  /**
   * admin runs `slotkeeper admin <args>` on this server's data dir (the
   * server must be stopped: the embedded store admits one process) and
   * returns its stdout.
   */
  admin(...args) {
    if (this.proc) throw new Error("slotkeeper admin needs the server stopped");
    const r = spawnSync(BIN, ["admin", ...args, "--data", this.dataDir], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
    if (r.status !== 0) throw new Error(`slotkeeper admin ${args.join(" ")} → ${r.status}: ${r.stderr}`);
    return r.stdout;
  }

  /** createToken makes an API token (printed once by the CLI) and returns it. */
  createToken(name, role = "admin", expires = "720h") {
    const m = /^token: (\S+)$/m.exec(this.admin("create-token", name, "--role", role, "--expires", expires));
    if (!m) throw new Error("slotkeeper admin create-token printed no token");
    return m[1];
  }

  /** createUser makes a local account and returns { name, password }. */
  createUser(name, role = "admin") {
    const m = /^password: (\S+)$/m.exec(this.admin("create-user", name, "--role", role));
    if (!m) throw new Error("slotkeeper admin create-user printed no password");
    return { name, password: m[1] };
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    if (!existsSync(BIN)) throw new Error(`${BIN} not found: run \`make build\` first`);
    this.port ??= await freePort();
    if (this.wantToken && this.token === undefined && hasAdminCommand()) {
      this.token = this.createToken("e2e-admin", "admin");
    }
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
   * api calls the REST API with the admin token (the actor is the token's
   * name: "e2e-admin", or "e2e-api" when lib/auth.js prepareAuth made it;
   * `actor` is only sent to servers without sign-in) and returns the parsed
   * JSON (throws on non-2xx). State changes always carry JSON (`{}` when
   * there is no body).
   */
  async api(method, path, body, actor = "e2e") {
    const headers = { "Content-Type": "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    else headers["X-Slotkeeper-Actor"] = actor;
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

  /**
   * until follows the server's live stream (/api/stream) and asks cond (an
   * API read) again at each frame: once the snapshot came (so nothing
   * before it is missed), at every change, and at each heartbeat (for
   * state no change frame names, such as the waitlist's). It returns
   * cond's first truthy answer, or fails after ms. Waiting on the stream,
   * not sleeping between polls (issue 36 item 7).
   */
  async until(what, cond, ms = 120_000) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), ms);
    try {
      const headers = { Accept: "text/event-stream" };
      if (this.token) headers.Authorization = `Bearer ${this.token}`;
      else headers["X-Slotkeeper-Actor"] = "e2e";
      const r = await fetch(this.url + "/api/stream", { headers, signal: ctl.signal });
      if (!r.ok) throw new Error(`GET /api/stream → ${r.status}`);
      const dec = new TextDecoder();
      let buf = "";
      for await (const chunk of r.body) {
        buf += dec.decode(chunk, { stream: true });
        let frames = 0;
        for (let i; (i = buf.indexOf("\n\n")) >= 0; buf = buf.slice(i + 2)) {
          if (/^event: (snapshot|change|heartbeat)$/m.test(buf.slice(0, i))) frames++;
        }
        if (frames === 0) continue;
        const v = await cond();
        if (v) return v;
      }
      throw new Error(`the stream ended while waiting for ${what}`);
    } catch (e) {
      if (ctl.signal.aborted) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
      throw e;
    } finally {
      clearTimeout(timer);
      ctl.abort();
    }
  }
}
