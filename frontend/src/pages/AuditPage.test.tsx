import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import type { AuditEntry } from "../services/audit";
import { setLang } from "../i18n";
import { applyChange, applySnapshot } from "../live/store";
import { jsonResponse } from "../test/fakes";
import { hashPath } from "../live/hashQuery";
import { AuditPage, fromQuery, matches } from "./AuditPage";

const entry = (position: number, over: Partial<AuditEntry> = {}): AuditEntry => ({
  position,
  stream: "slot-a",
  type: "SlotOccupied",
  slot: "a",
  actor: "alice",
  time: "2026-01-01T00:00:00Z",
  summary: `e${position}`,
  ...over,
});

let urls: string[];

beforeEach(() => {
  setLang("en");
  urls = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      urls.push(url);
      return jsonResponse({ entries: [entry(2), entry(1)] }); // newest first, as order=newest answers
    }),
  );
  applySnapshot({ position: 2, server_time: "", slots: [] });
});

const flush = () => act(async () => {});

describe("audit page", () => {
  it("links every row of a slot to the slot at that moment (issue 28)", async () => {
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    expect(screen.getAllByTestId("audit-moment").map((a) => a.getAttribute("href"))).toEqual(["/slots/a/at/2", "/slots/a/at/1"]);
  });

  it("filters like the server: slot, job, actor, type, since", () => {
    const f = { slot: "a", job: "", actor: "alice", kind: "SlotOccupied", since: "2025-12-31T00:00" };
    expect(matches(entry(1), f)).toBe(true);
    expect(matches(entry(1, { slot: "b" }), f)).toBe(false);
    expect(matches(entry(1, { actor: "bob" }), f)).toBe(false);
    expect(matches(entry(1, { type: "JobQueued" }), f)).toBe(false);
    expect(matches(entry(1, { time: "2025-01-01T00:00:00Z" }), f)).toBe(false);
  });

  it("lists the log newest first, follows new entries at the top, and sends the filters", async () => {
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    expect(urls[0]).toBe("/api/audit?order=newest&limit=200");
    const positions = () => screen.getAllByTestId("audit-row").map((r) => r.querySelector("td:last-child")?.textContent);
    expect(positions()).toEqual(["2", "1"]);
    act(() => {
      applyChange({ position: 3, audit: entry(3, { type: "JobQueued", args: { kind: "reset", by: "bob" } }) });
      applyChange({ position: 4, audit: entry(4, { slot: "zzz" }) });
    });
    expect(positions()).toEqual(["4", "3", "2", "1"]);
    expect(screen.getAllByTestId("audit-summary")[1]?.textContent).toBe("Reset requested by bob");
    fireEvent.change(screen.getByLabelText("Slot"), { target: { value: "a" } });
    fireEvent.click(screen.getByRole("button", { name: "Apply" }));
    await flush();
    expect(urls[urls.length - 1]).toBe("/api/audit?slot=a&order=newest&limit=200");
    expect(positions()).not.toContain("4");
  });

  it("narrows by kind of action, person and slot with chips", async () => {
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    act(() => {
      applyChange({ position: 3, audit: entry(3, { type: "StepStarted", actor: "bob", slot: "b", args: { step: "delete_db" } }) });
    });
    expect(screen.getAllByTestId("audit-row")).toHaveLength(3);
    fireEvent.click(screen.getByTestId("chip-group-steps"));
    expect(screen.getAllByTestId("audit-row").map((r) => r.getAttribute("data-type"))).toEqual(["StepStarted"]);
    expect(screen.getByTestId("chip-group-steps").getAttribute("aria-pressed")).toBe("true");
    fireEvent.click(screen.getByTestId("chip-group-all"));
    const person = screen.getAllByTestId("chip-person").find((c) => c.textContent === "bob");
    fireEvent.click(person!);
    await flush();
    expect(urls[urls.length - 1]).toBe("/api/audit?actor=bob&order=newest&limit=200");
    const slot = screen.getAllByTestId("chip-slot").find((c) => c.textContent === "a");
    fireEvent.click(slot!);
    await flush();
    expect(urls[urls.length - 1]).toBe("/api/audit?slot=a&actor=bob&order=newest&limit=200");
  });

  it("offers only people as person chips and keeps plumbing out of the live view (issue 25/27)", async () => {
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    const rows = screen.getAllByTestId("audit-row").length;
    act(() => {
      applyChange({ position: 3, audit: entry(3, { type: "StepStarted", actor: "worker:w1/abc/0", actor_kind: "worker" }) });
      applyChange({ position: 4, audit: entry(4, { type: "ConsumerCheckpointed", actor: "system:deadlines", actor_kind: "system", plumbing: true }) });
      applyChange({ position: 5, audit: entry(5, { type: "JobQueued", actor: "system:deadline" }) });
    });
    expect(screen.getAllByTestId("audit-row")).toHaveLength(rows + 2); // the checkpoint is not a row
    const people = screen.getAllByTestId("chip-person").map((c) => c.textContent);
    expect(people).toContain("alice");
    expect(people.some((p) => p?.startsWith("worker:") || p?.startsWith("system:"))).toBe(false);
  });

  it("speaks Korean: event names, summaries and times", async () => {
    setLang("ko");
    vi.stubGlobal(
      "fetch",
      vi.fn(async () => jsonResponse({ entries: [entry(1, { type: "OccupancyExtended", args: { by: "minjun", until: "2026-11-30T08:53:00Z" } })] })),
    );
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    const row = screen.getByTestId("audit-row");
    expect(row.textContent).toContain("기한 연장");
    expect(screen.getByTestId("audit-summary").textContent).toMatch(/^minjun님이 \d+월 \d+일 오[전후] \d+:\d\d까지 연장$/);
    expect(row.textContent).not.toContain("OccupancyExtended");
    // How long ago, the absolute time on hover (issue 27 item 8).
    const time = row.querySelector("time") as HTMLTimeElement;
    expect(time.textContent).toMatch(/전$/);
    expect(time.title).toMatch(/^(2026년 )?1월 1일 오[전후] \d+:\d\d:00$/);
  });

  it("keeps its filters in the hash route's query: read on load, written on change, never on other pages (issue 27 item 8)", async () => {
    window.history.replaceState(null, "", "/#/audit?actor=bob&group=steps&kind=NoSuchEvent");
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    expect(urls[0]).toBe("/api/audit?actor=bob&order=newest&limit=200"); // an unknown type is dropped
    expect(screen.getByTestId("chip-group-steps").getAttribute("aria-pressed")).toBe("true");
    expect(screen.getAllByTestId("chip-person").find((c) => c.textContent?.replace("✓ ", "") === "bob")?.getAttribute("aria-pressed")).toBe("true");
    const history = window.history.length;
    fireEvent.click(screen.getAllByTestId("chip-slot").find((c) => c.textContent?.replace("✓ ", "") === "a")!);
    await flush();
    expect(urls[urls.length - 1]).toBe("/api/audit?slot=a&actor=bob&order=newest&limit=200");
    expect(window.location.hash).toBe("#/audit?slot=a&actor=bob&group=steps");
    expect(window.location.search).toBe(""); // the real URL's query stays clean for every other page
    expect(window.history.length).toBe(history); // replaced, not a new entry
    fireEvent.click(screen.getByTestId("chip-group-all"));
    fireEvent.click(screen.getAllByTestId("chip-person").find((c) => c.textContent?.replace("✓ ", "") === "bob")!);
    await flush();
    expect(window.location.hash).toBe("#/audit?slot=a");
    // A shared link pasted while on the page: the view follows it.
    act(() => {
      window.location.hash = "#/audit?slot=zzz";
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    });
    await flush();
    expect(urls[urls.length - 1]).toBe("/api/audit?slot=zzz&order=newest&limit=200");
    expect((screen.getByLabelText("Slot") as HTMLInputElement).value).toBe("zzz");
    // The router routes on the path alone.
    expect(hashPath("/audit?slot=zzz")).toBe("/audit");
    expect(hashPath("/jobs")).toBe("/jobs");
    expect(fromQuery("group=nope&since=2026-01-01T10:00").group).toBe("");
  });

  it("pages backwards from the oldest entry shown", async () => {
    const many = Array.from({ length: 200 }, (_, i) => entry(400 - i));
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string) => {
        urls.push(url);
        return jsonResponse({ entries: url.includes("before=") ? [entry(10)] : many });
      }),
    );
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    fireEvent.click(screen.getByRole("button", { name: "Load more" }));
    await flush();
    expect(urls[urls.length - 1]).toBe("/api/audit?before=201&order=newest&limit=200");
    expect(screen.getAllByTestId("audit-row")).toHaveLength(201);
  }, 30_000); // 200 rows render slowly on a loaded machine
});
