import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import type { AuditEntry } from "../api/types";
import { setLang } from "../i18n";
import { resetHealth } from "../live/health";
import { applyChange, applySnapshot, resetLiveStore } from "../live/store";
import { jsonResponse } from "../test/fakes";
import { AuditPage, matches } from "./AuditPage";

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
      return jsonResponse({ entries: [entry(1), entry(2)] });
    }),
  );
  applySnapshot({ position: 2, server_time: "", slots: [] });
});

afterEach(() => {
  cleanup();
  resetLiveStore();
  resetHealth();
  vi.unstubAllGlobals();
});

const flush = () => act(async () => {});

describe("audit page", () => {
  it("filters like the server: slot, job, actor, type, since", () => {
    const f = { slot: "a", job: "", actor: "alice", kind: "SlotOccupied", since: "2025-12-31T00:00" };
    expect(matches(entry(1), f)).toBe(true);
    expect(matches(entry(1, { slot: "b" }), f)).toBe(false);
    expect(matches(entry(1, { actor: "bob" }), f)).toBe(false);
    expect(matches(entry(1, { type: "JobQueued" }), f)).toBe(false);
    expect(matches(entry(1, { time: "2025-01-01T00:00:00Z" }), f)).toBe(false);
  });

  it("lists the log, sends the filters, then follows new entries live", async () => {
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    expect(screen.getAllByRole("row")).toHaveLength(3); // header + 2
    act(() => {
      applyChange({ position: 3, audit: entry(3, { summary: "live one" }) });
      applyChange({ position: 4, audit: entry(4, { slot: "zzz", summary: "other slot" }) });
    });
    expect(screen.getByText("live one")).toBeTruthy();
    fireEvent.change(screen.getByLabelText("Slot"), { target: { value: "a" } });
    fireEvent.click(screen.getByRole("button", { name: "Apply" }));
    await flush();
    expect(urls[urls.length - 1]).toBe("/api/audit?slot=a&limit=200");
    expect(screen.queryByText("other slot")).toBeNull();
  });
});
