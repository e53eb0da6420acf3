// A real OpenID Connect provider process on loopback for the browser
// tests: backend/auth/oidctest/cmd/oidcprovider (mockoidc), built here with
// `go build` (a test tool, not part of bin/slotkeeper). It prints its
// issuer and client on start; each user queued on its stdin is the answer
// to the next authorization request.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { ROOT } from "./server.js";

export class OIDCProvider {
  async start() {
    this.dir = mkdtempSync(join(tmpdir(), "slotkeeper-oidc-"));
    const bin = join(this.dir, "oidcprovider");
    const b = spawnSync(process.env.GO ?? "go", ["build", "-o", bin, "./backend/auth/oidctest/cmd/oidcprovider"], { cwd: ROOT, encoding: "utf8", timeout: 180_000 });
    if (b.status !== 0) throw new Error(`go build oidcprovider → ${b.status}: ${b.stderr}`);
    this.proc = spawn(bin, [], { stdio: ["pipe", "pipe", "inherit"] });
    this.exited = new Promise((res) => this.proc.once("exit", (code, signal) => res({ code, signal })));
    this.lines = createInterface({ input: this.proc.stdout })[Symbol.asyncIterator]();
    const first = await this.next(15_000);
    this.issuer = first.issuer;
    this.clientId = first.client_id;
    // serve reads the client secret from a file (flags show in `ps`).
    this.secretFile = join(this.dir, "client-secret");
    writeFileSync(this.secretFile, `${first.client_secret}\n`, { mode: 0o600 });
    return this;
  }

  /** next reads the provider's next JSON line, failing after timeoutMs or if it exits. */
  async next(timeoutMs) {
    let timer;
    const timeout = new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`oidcprovider said nothing for ${timeoutMs} ms`)), timeoutMs);
    });
    const exited = this.exited.then((x) => {
      throw new Error(`oidcprovider exited: ${JSON.stringify(x)}`);
    });
    try {
      const { value, done } = await Promise.race([this.lines.next(), timeout, exited]);
      if (done) throw new Error("oidcprovider closed its output");
      return JSON.parse(value);
    } finally {
      clearTimeout(timer);
    }
  }

  /** queue makes the next sign-in at the provider return this user; resolves once it is queued. */
  async queue(user) {
    this.proc.stdin.write(`${JSON.stringify(user)}\n`);
    const ans = await this.next(10_000);
    if (ans.queued !== user.sub) throw new Error(`oidcprovider answered ${JSON.stringify(ans)}`);
  }

  /** flags are serve's OIDC settings for this provider. */
  flags(extra = {}) {
    return {
      "oidc-issuer": this.issuer,
      "oidc-client-id": this.clientId,
      "oidc-client-secret-file": this.secretFile,
      "oidc-scopes": "profile,email,groups",
      ...extra,
    };
  }

  async close() {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.stdin.end(); // it stops at the end of its input
      const res = await Promise.race([this.exited, new Promise((r) => setTimeout(() => r(undefined), 10_000))]);
      if (!res) {
        this.proc.kill("SIGKILL");
        await this.exited;
      }
    }
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}
