import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { applySnapshot } from "../live/store";
import { jsonResponse, slot } from "../test/fakes";
import { Board } from "./Board";

let posts: { url: string; body: unknown }[];
let occupyAnswer: (name: string) => Response;

beforeEach(() => {
  setAuthForTest({ id: "user:u-bob", name: "bob", role: "member" });
  setLang("en");
  posts = [];
  occupyAnswer = (name) => jsonResponse(slot({ name, lifecycle: "occupied", occupant: "bob", position: 99 }));
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      if (init?.method === "POST") {
        posts.push({ url, body: JSON.parse(String(init.body)) });
        return occupyAnswer(url.split("/")[3] ?? "");
      }
      // After a lost race the board asks who has the slot now.
      return jsonResponse(slot({ name: url.split("/")[3], lifecycle: "occupied", occupant: "amy", position: 98 }));
    }),
  );
  applySnapshot({
    position: 10,
    server_time: new Date().toISOString(),
    slots: [
      slot({ name: "slot-10", lifecycle: "vacant", occupant: undefined }),
      slot({ name: "slot-2", lifecycle: "vacant", occupant: undefined }),
      slot({ name: "slot-1", lifecycle: "occupied", occupant: "bob", deadline: new Date(Date.now() + 36e5 * 5).toISOString() }),
      slot({ name: "slot-3", lifecycle: "occupied", occupant: "amy", deadline: new Date(Date.now() + 60_000 * 20).toISOString() }),
    ],
  });
});

const names = () => screen.getAllByTestId("slot-card").map((c) => c.getAttribute("data-slot"));
const flush = () => act(async () => {});

describe("board", () => {
  it("counts by state, shows attention first, marks my slot, sorts naturally", () => {
    render(<Board />);
    expect(names()).toEqual(["slot-3", "slot-1", "slot-2", "slot-10"]);
    expect(screen.getByTestId("chip-vacant").getAttribute("data-count")).toBe("2");
    expect(screen.getByTestId("chip-occupied").getAttribute("data-count")).toBe("2");
    // A deadline within the hour is a warning first in order, not "needs attention" (issue 35 item 1).
    expect(screen.getByTestId("chip-attention").textContent).toMatch(/Needs attention 0/);
    const card3 = screen.getAllByTestId("slot-card")[0];
    expect(card3.getAttribute("data-attention")).toBe("deadline_soon");
    expect(card3.textContent).toMatch(/Due within the hour/);
    expect(card3.classList.contains("attn")).toBe(false);
    expect(screen.getAllByTestId("slot-card")[1].getAttribute("data-mine")).toBe("true");
    fireEvent.click(screen.getByTestId("chip-mine"));
    expect(names()).toEqual(["slot-1"]);
  });

  it("says so when no slot matches a filter", () => {
    render(<Board />);
    fireEvent.change(screen.getByRole("searchbox"), { target: { value: "nothing" } });
    expect(screen.getByTestId("board-no-match").textContent).toMatch(/No slot matches “nothing”/);
    fireEvent.click(screen.getByText("Show all slots"));
    expect(names()).toHaveLength(4);
  });

  it("occupies a vacant slot from its card and takes the next free slot in natural order", async () => {
    render(<Board />);
    fireEvent.click(screen.getAllByTestId("card-occupy")[1]); // slot-10's card
    await flush();
    expect(posts.map((p) => p.url)).toEqual(["/api/slots/slot-10/occupy"]);
    fireEvent.click(screen.getByTestId("take-next"));
    await flush();
    expect(posts.map((p) => p.url)).toEqual(["/api/slots/slot-10/occupy", "/api/slots/slot-2/occupy"]);
    expect(screen.getByTestId("board-outcome").textContent).toMatch(/slot-2 is yours now/);
  });

  it("a slot taken meanwhile is a clear message naming who took it, in ko too", async () => {
    occupyAnswer = () => jsonResponse({ error: { code: "conflict", message: "slot slot-2 is occupied" } }, 409);
    render(<Board />);
    fireEvent.click(screen.getByTestId("take-next"));
    await flush();
    expect(screen.getByTestId("board-race").textContent).toMatch(/slot-2 was taken by amy just before your request arrived; nothing was occupied for you/);
    act(() => setLang("ko"));
    expect(screen.getByTestId("board-race").textContent).toMatch(/amy님이 slot-2를 가져갔습니다/);
  });
});
