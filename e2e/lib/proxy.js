// A loopback TCP proxy that a test can cut and restore: the browser talks
// to the server through it, so the tab can lose its connection while the
// server (and its jobs) keep running.
import { createServer, connect } from "node:net";
import { freePort } from "./server.js";

export class CutProxy {
  constructor(targetPort) {
    this.targetPort = targetPort;
    this.sockets = new Set();
    this.listener = undefined;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    this.port ??= await freePort();
    this.listener = createServer((client) => {
      const upstream = connect(this.targetPort, "127.0.0.1");
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise((res, rej) => {
      this.listener.once("error", rej);
      this.listener.listen(this.port, "127.0.0.1", res);
    });
    return this;
  }

  /** cut drops every connection and refuses new ones until restore. */
  async cut() {
    const l = this.listener;
    this.listener = undefined;
    const closed = new Promise((res) => l.close(res));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  /** restore accepts connections again on the same port. */
  restore() {
    return this.start();
  }

  async close() {
    if (this.listener) await this.cut();
  }
}
