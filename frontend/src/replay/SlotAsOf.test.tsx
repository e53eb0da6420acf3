import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setLang } from "../i18n";
import { jsonResponse, slot } from "../test/fakes";
import { fromLocalInput, momentHref } from "./moment";
import { decodeAt, SlotAsOfPage, SlotMoment, SlotTimeline } from "./SlotAsOf";

let urls: string[];
let slotAnswer: () => Response;

const changes = {
  slot: "s1",
  from: { position: 0, time: "0001-01-01T00:00:00Z", live: false },
  to: { position: 12, time: "2026-01-02T15:00:00Z", live: false },
  changes: [
    { field: "occupant", before: null, after: "alice", position: 5, type: "SlotOccupied", stream: "slot-s1", actor: "alice", time: "2026-01-02T14:00:00Z" },
    { field: "resource", change: "lost", before: { kind: "database", id: "d-1" }, after: null, position: 11, type: "DBDeleted", stream: "job-j1", actor: "worker:h:1", time: "2026-01-02T14:30:00Z" },
  ],
};

beforeEach(() => {
  setLang("en");
  urls = [];
  slotAnswer = () => jsonResponse({ ...slot({ occupant: "alice" }), as_of: { position: 12, time: "2026-01-02T15:00:00Z", live: false } });
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      urls.push(url);
      if (url.includes("/changes")) return jsonResponse(changes);
      return slotAnswer();
    }),
  );
});

const flush = () => act(async () => {});

function mount(path: string) {
  const mem = memoryLocation({ path, record: true });
  render(
    <Router hook={mem.hook}>
      <Route path="/slots/:name/at/:at">{(p) => <SlotAsOfPage name={p.name} at={decodeAt(p.at)} />}</Route>
      <Route path="/slots/:name">{(p) => <SlotMoment name={p.name} />}</Route>
    </Router>,
  );
  return mem.history;
}

describe("the slot as of a moment", () => {
  it("is marked as of, not live, with the way back and the timeline up to then", async () => {
    mount("/slots/s1/at/12");
    await flush();
    await flush();
    expect(urls).toContain("/api/slots/s1?at=12");
    expect(urls).toContain("/api/slots/s1/changes?to=12&order=newest");
    const banner = screen.getByTestId("asof-banner");
    expect(banner.textContent).toMatch(/As of .* \(position 12\), not live/);
    expect(banner.dataset.live).toBe("false");
    expect(screen.getByTestId("asof-back").getAttribute("href")).toBe("/slots/s1");
    expect(screen.getByTestId("asof-occupant").textContent).toBe("alice");
    const rows = screen.getAllByTestId("asof-row-link");
    expect(rows.map((a) => a.getAttribute("href"))).toEqual(["/slots/s1/at/11", "/slots/s1/at/5"]);
    expect(screen.getByTestId("asof-rows").textContent).toMatch(/Resource\s*lost: Database d-1/);
  });

  it("shows the pull request that held the slot then", async () => {
    const pr = { repo: { project: "DEMO", slug: "webshop" }, id: 3, title: "Faster checkout", author: "Dana", branch: "feature/x", head: "1".repeat(40), job_id: "j-pr" };
    slotAnswer = () => jsonResponse({ ...slot({ occupant: "Dana", pull_request: pr }), as_of: { position: 12, time: "2026-01-02T15:00:00Z", live: false } });
    mount("/slots/s1/at/12");
    await flush();
    await flush();
    expect(screen.getByTestId("slot-pr").dataset.pr).toBe("DEMO/webshop#3");
    expect(screen.getByTestId("slot-pr").textContent).toContain("Faster checkout");
  });

  it("names the pull request taking the slot in its timeline", async () => {
    changes.changes.push({ field: "pull_request", before: null, after: "DEMO/webshop#3", position: 12, type: "PRSlotTaken", stream: "pr-DEMO-webshop-3", actor: "bitbucket", time: "2026-01-02T14:40:00Z" } as never);
    try {
      mount("/slots/s1/at/12");
      await flush();
      await flush();
      const row = screen.getByTestId("asof-rows").querySelector('[data-field="pull_request"]');
      expect(row?.textContent).toMatch(/Pull request\s*none → DEMO\/webshop#3/);
    } finally {
      changes.changes.pop();
    }
  });

  it("shows no pull request when none held the slot then", async () => {
    mount("/slots/s1/at/12");
    await flush();
    await flush();
    expect(screen.getByTestId("asof-occupant").textContent).toBe("alice");
    expect(screen.queryByTestId("slot-pr")).toBeNull();
  });

  it("says when the slot did not exist yet, and shows a bad moment's error", async () => {
    slotAnswer = () => jsonResponse({ error: { code: "not_found", message: "no" } }, 404);
    mount("/slots/s1/at/1");
    await flush();
    // The not-found notice also links back to the board and the jobs.
    expect(screen.getByRole("alert").textContent).toMatch(/^Slot s1 did not exist at that moment\./);
    expect(screen.getByRole("link", { name: "Go to the board" })).toBeTruthy();
    cleanup();
    slotAnswer = () => jsonResponse({ error: { code: "invalid", message: "query at must be a log position", details: { field: "at" } } }, 400);
    mount("/slots/s1/at/garbage");
    await flush();
    expect(screen.getByTestId("slot-asof").textContent).toMatch(/query at must be a log position/);
  });

  it("reads in Korean", async () => {
    setLang("ko");
    mount("/slots/s1/at/12");
    await flush();
    expect(screen.getByTestId("asof-banner").textContent).toMatch(/위치 12.*실시간이 아닙니다/);
    expect(screen.getByTestId("asof-back").textContent).toBe("실시간으로 돌아가기");
  });

  it("the date-time field opens the slot at that time", async () => {
    const history = mount("/slots/s1");
    fireEvent.change(screen.getByTestId("asof-time"), { target: { value: "2026-01-02T15:00:00" } });
    fireEvent.click(screen.getByTestId("asof-show"));
    await flush();
    const want = momentHref("s1", new Date(2026, 0, 2, 15, 0, 0).toISOString());
    expect(history[history.length - 1]).toBe(want);
    expect(decodeAt(want.split("/").pop() ?? "")).toBe(new Date(2026, 0, 2, 15).toISOString());
  });

  it("the live page's timeline loads only when opened", async () => {
    const mem = memoryLocation({ path: "/slots/s1" });
    render(
      <Router hook={mem.hook}>
        <SlotTimeline name="s1" />
      </Router>,
    );
    await flush();
    expect(urls).toEqual([]);
    const d = screen.getByTestId("asof-timeline") as HTMLDetailsElement;
    d.open = true;
    fireEvent(d, new Event("toggle"));
    await flush();
    expect(urls).toEqual(["/api/slots/s1/changes?order=newest"]);
  });
});

describe("a long timeline", () => {
  it("shows the newest changes and links the older ones as an earlier moment (issue 33)", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string) => {
        urls.push(url);
        return jsonResponse({ ...changes, changes: changes.changes.slice(1), next_to: 5 });
      }),
    );
    const mem = memoryLocation({ path: "/slots/s1" });
    render(
      <Router hook={mem.hook}>
        <SlotTimeline name="s1" open />
      </Router>,
    );
    await flush();
    expect(screen.getByTestId("asof-rows").querySelectorAll("li")).toHaveLength(1);
    const older = screen.getByTestId("asof-older");
    expect(older.textContent).toBe("Older changes: the timeline up to position 5");
    expect(older.getAttribute("href")).toBe(momentHref("s1", 5));
  });
});

describe("fromLocalInput", () => {
  it("turns a local date-time into RFC 3339 and refuses junk", () => {
    expect(fromLocalInput("2026-01-02T15:00")).toBe(new Date(2026, 0, 2, 15).toISOString());
    expect(fromLocalInput("")).toBe("");
    expect(fromLocalInput("soon")).toBe("");
  });
});
