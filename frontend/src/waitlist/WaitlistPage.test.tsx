import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { applyChange } from "../live/store";
import { startStream } from "../live/stream";
import { FakeEventSource, fakeFactory, jsonResponse, slot } from "../test/fakes";
import type { WaitlistAnswer, WaitlistEntry } from "../services/waitlist";
import { WaitlistPage } from "./WaitlistPage";

const NOW = new Date("2026-01-01T00:00:00Z");
let stopStream: (() => void) | undefined;
let fetchMock: ReturnType<typeof vi.fn>;
let es: FakeEventSource;
let calls: { method: string; url: string; csrf?: string }[];

const me = { subject: { id: "user:bob", name: "bob", role: "member" }, csrf: "tok-1" };

function entry(over: Partial<WaitlistEntry> = {}): WaitlistEntry {
  return {
    id: "11111111-1111-1111-1111-111111111111",
    who: "bob",
    who_id: "user:bob",
    position: 1,
    duration: "2h0m0s",
    joined_at: "2025-12-31T23:00:00Z",
    estimated_wait: { seconds: null, basis: "unknown: no reset has been measured yet" },
    ...over,
  };
}

function answer(entries: WaitlistEntry[], over: Partial<WaitlistAnswer> = {}): WaitlistAnswer {
  return { entries, position: 100, server_time: NOW.toISOString(), offer_ttl: "15m0s", warnings: [], ...over };
}

/** serve answers /api/auth/me and the waitlist with the current `list`. */
let list: WaitlistAnswer;
function serve() {
  fetchMock.mockImplementation(async (url: string, init: RequestInit = {}) => {
    const method = init.method ?? "GET";
    const headers = (init.headers ?? {}) as Record<string, string>;
    calls.push({ method, url, csrf: headers["X-CSRF-Token"] });
    if (url === "/api/auth/me") return jsonResponse(me);
    if (url.startsWith("/api/waitlist") && method === "GET") return jsonResponse(list);
    if (url.endsWith("/accept")) return jsonResponse(answer([]));
    if (url === "/api/waitlist" && method === "POST") {
      list = answer([entry()]);
      return jsonResponse(list, 201);
    }
    return jsonResponse({ error: { code: "not_found", message: "no" } }, 404);
  });
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(NOW);
  setLang("en");
  // The app signs the tab in before it shows a page; the session holds the token.
  setAuthForTest(me.subject, me.csrf);
  FakeEventSource.opened = [];
  fetchMock = vi.fn();
  calls = [];
  vi.stubGlobal("fetch", fetchMock);
  stopStream = startStream({ heartbeatMs: 15_000, create: fakeFactory });
  es = FakeEventSource.last();
});

// This file's own stream, stopped after the unmount (a page still mounted
// reacts to the stream stopping); the shared teardown runs after this.
afterEach(() => {
  cleanup();
  stopStream?.();
});

function goLive(slots = [slot({ name: "s1", lifecycle: "occupied" })]) {
  act(() => {
    es.open();
    es.emit("snapshot", { position: 100, server_time: NOW.toISOString(), slots }, "100");
  });
}

async function settle() {
  await act(async () => {
    await vi.advanceTimersByTimeAsync(0);
  });
}

let history: string[] = [];
function mount() {
  const mem = memoryLocation({ path: "/waitlist", record: true });
  history = mem.history;
  render(
    <Router hook={mem.hook}>
      <WaitlistPage />
    </Router>,
  );
}

describe("waitlist page", () => {
  it("offers to join when nothing is free, and then shows the place with an honest 'unknown' estimate", async () => {
    goLive();
    list = answer([]);
    serve();
    mount();
    await settle();
    expect(screen.getByTestId("join-form")).toBeTruthy();
    expect(screen.getByTestId("queue-empty")).toBeTruthy();
    fireEvent.click(screen.getByTestId("join"));
    await settle();
    await settle();
    const post = calls.find((c) => c.method === "POST");
    expect(post).toMatchObject({ url: "/api/waitlist", csrf: "tok-1" });
    expect(screen.getByTestId("my-position").textContent).toMatch(/Position 1/);
    expect(within(screen.getByTestId("my-entry")).getByTestId("estimate").textContent).toBe("unknown");
    expect(screen.getByTestId("estimate-basis").textContent).toMatch(/no reset has been measured/);
  });

  it("does not offer to join while a slot is free", async () => {
    goLive([slot({ name: "s1", lifecycle: "vacant", occupant: undefined })]);
    list = answer([]);
    serve();
    mount();
    await settle();
    expect(screen.queryByTestId("join-form")).toBeNull();
    expect(screen.getByTestId("slot-free")).toBeTruthy();
  });

  it("shows an offer arriving live with its countdown, and accepts it", async () => {
    goLive();
    list = answer([entry({ estimated_wait: { seconds: 600, at: "2026-01-01T00:10:00Z", basis: "slot #1 to free up" } })]);
    serve();
    mount();
    await settle();
    expect(within(screen.getByTestId("my-entry")).getByTestId("estimate").textContent).toMatch(/10m left/);
    expect(screen.queryByTestId("offer")).toBeNull();

    // The consumer offers a slot: the stream shows OfferMade, the page reloads.
    list = answer([entry({ offer: { id: "o1", slot: "s2", expires_at: "2026-01-01T00:15:00Z" } })], { position: 101 });
    act(() => {
      applyChange({
        position: 101,
        audit: { position: 101, stream: "waitlist", type: "OfferMade", time: NOW.toISOString(), summary: "OfferMade" },
      });
    });
    await settle();
    expect(calls.some((c) => c.url === "/api/waitlist?after=101")).toBe(true);
    expect(screen.getByTestId("offer").textContent).toMatch(/Slot s2 is held for you/);
    expect(screen.getByTestId("offer").textContent).toMatch(/15m left/);
    await act(async () => {
      await vi.advanceTimersByTimeAsync(60_000);
    });
    expect(screen.getByTestId("offer").textContent).toMatch(/14m left/);

    fireEvent.click(screen.getByTestId("accept"));
    await settle();
    const post = calls.find((c) => c.method === "POST");
    expect(post).toMatchObject({ url: "/api/waitlist/11111111-1111-1111-1111-111111111111/accept", csrf: "tok-1" });
    // Accepted: the page goes to the slot (issue 35 item 10), not to the join form.
    expect(history[history.length - 1]).toBe("/slots/s2");
  });

  it("warns before my slot's deadline and extends it", async () => {
    goLive();
    list = answer([], { warnings: [{ slot: "s1", occupant: "bob", deadline: "2026-01-01T00:10:00Z", lead_s: 600 }] });
    serve();
    mount();
    await settle();
    expect(screen.getByTestId("deadline-warnings").textContent).toMatch(/s1 will be reset/);
    fireEvent.click(screen.getByTestId("extend-s1"));
    await settle();
    expect(calls.find((c) => c.method === "POST")?.url).toBe("/api/slots/s1/extend");
    const body = JSON.parse(fetchMock.mock.calls.find((c) => (c[1] as RequestInit | undefined)?.method === "POST")?.[1].body as string);
    expect(body.until).toBe("2026-01-01T01:10:00.000Z");
  });
});
