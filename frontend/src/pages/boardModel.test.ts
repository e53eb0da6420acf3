import { describe, expect, it } from "vitest";
import { slot } from "../test/fakes";
import { attention, boardCounts, boardEntries, holdsFrom, nextFreeSlot, unready } from "./boardModel";

const now = Date.parse("2026-01-01T12:00:00Z");
const inMin = (m: number) => new Date(now + m * 60_000).toISOString();
const bob = { id: "user:u-bob", name: "bob", role: "member" };

describe("board model", () => {
  const slots = [
    slot({ name: "slot-10", lifecycle: "vacant", occupant: undefined }),
    slot({ name: "slot-2", lifecycle: "vacant", occupant: undefined }),
    slot({ name: "slot-1", lifecycle: "occupied", occupant: "bob", deadline: inMin(600) }),
    slot({ name: "slot-3", lifecycle: "occupied", occupant: "amy", deadline: inMin(30) }),
    slot({ name: "slot-9", lifecycle: "teardown_incomplete", occupant: undefined }),
    slot({
      name: "slot-20",
      lifecycle: "occupied",
      occupant: "amy",
      deadline: inMin(600),
      recovery: { job_id: "j9", state: "failed", completed_steps: ["delete_db"], uncertain_step: "delete_volumes", remaining: [] },
    }),
    slot({
      name: "slot-21",
      lifecycle: "vacant",
      occupant: undefined,
      recovery: { job_id: "j8", state: "cancelled", completed_steps: [], remaining: [] },
    }),
  ];

  it("puts what needs attention first, most urgent first, then the rest in natural order", () => {
    const order = boardEntries(slots, { text: "" }, now, bob).map((e) => `${e.slot.name}:${e.attention.join("+")}`);
    expect(order).toEqual(["slot-20:uncertain+failed", "slot-9:teardown_incomplete", "slot-3:deadline_soon", "slot-1:", "slot-2:", "slot-10:", "slot-21:"]);
  });

  it("a job cancelled before it started needs no attention; an overdue deadline does", () => {
    expect(attention(slots[6], now)).toEqual([]);
    expect(attention(slot({ lifecycle: "occupied", deadline: inMin(-5) }), now)).toEqual(["overdue"]);
    expect(attention(slot({ lifecycle: "occupied", deadline: inMin(30) }), now)).toEqual(["deadline_soon"]);
    expect(attention(slot({ lifecycle: "occupied", deadline: inMin(61) }), now)).toEqual([]);
  });

  it("filters by text, lifecycle, mine and attention, and counts by state", () => {
    expect(boardEntries(slots, { text: "AMY" }, now, bob).map((e) => e.slot.name)).toEqual(["slot-20", "slot-3"]);
    expect(boardEntries(slots, { text: "", mine: true }, now, bob).map((e) => e.slot.name)).toEqual(["slot-1"]);
    expect(boardEntries(slots, { text: "", lifecycle: "vacant" }, now, bob).map((e) => e.slot.name)).toEqual(["slot-2", "slot-10", "slot-21"]);
    // A deadline within the hour is a warning, not "needs attention" (issue 35 item 1).
    expect(boardEntries(slots, { text: "", attention: true }, now, bob).map((e) => e.slot.name)).toEqual(["slot-20", "slot-9"]);
    expect(boardEntries(slots, { text: "zzz" }, now, bob)).toEqual([]);
    const c = boardCounts(slots, now, bob);
    expect(Object.fromEntries(c.lifecycle)).toEqual({ vacant: 3, occupied: 3, teardown_incomplete: 1 });
    expect([c.attention, c.mine]).toEqual([2, 1]);
  });

  it("the next free slot is a ready one before a never-reset one (issue 35 item 5)", () => {
    const ready = slot({ name: "slot-30", lifecycle: "vacant", occupant: undefined, ready: true });
    expect(nextFreeSlot([...slots, ready])?.name).toBe("slot-30");
    expect(unready(slots[1])?.code).toBe("never_reset");
    expect(unready(ready)).toBeUndefined();
    expect(unready(slot({ lifecycle: "vacant", occupant: undefined, missing_code: "not_healthy", missing_args: { status: "exited" } }))).toEqual({
      code: "not_healthy",
      args: { status: "exited" },
    });
  });

  it("the next free slot is the first vacant one in natural order", () => {
    expect(nextFreeSlot(slots)?.name).toBe("slot-2");
    expect(nextFreeSlot(slots.filter((s) => s.lifecycle !== "vacant"))).toBeUndefined();
  });
});

describe("holds (issue 27 item 3)", () => {
  it("a slot the waitlist holds for someone else is not the next free slot; for its holder it is", () => {
    const slots = [slot({ name: "a", lifecycle: "vacant" }), slot({ name: "b", lifecycle: "vacant" })];
    const entries = [{ id: "e1", who: "wendy", who_id: "u-w", offer: { slot: "a", expires_at: inMin(5) } }];
    const forBob = holdsFrom(entries, bob);
    expect(forBob.get("a")?.mine).toBe(false);
    expect(nextFreeSlot(slots, forBob)?.name).toBe("b");
    expect(nextFreeSlot([slots[0]], forBob)).toBeUndefined();
    const forWendy = holdsFrom(entries, { id: "u-w", name: "wendy" });
    expect(forWendy.get("a")?.mine).toBe(true);
    expect(nextFreeSlot([slots[0]], forWendy)?.name).toBe("a");
  });
});
