import { describe, expect, it } from "vitest";
import { slot } from "../test/fakes";
import { jobActions, ownsSlot, slotActions, type Subject } from "./roles";

const who = (role: string, name = "alice"): Subject => ({ id: `user:u-${name}`, name, role });

describe("roles", () => {
  const mine = slot({ occupant: "alice" });
  const theirs = slot({ occupant: "bob" });

  it.each([
    // role, slot, occupy, extend, release, needs reason, teardown, promote
    ["viewer", mine, false, false, false, false, false, false],
    ["member", mine, true, true, true, false, false, false],
    ["member", theirs, true, false, false, false, false, false],
    ["operator", mine, true, true, true, false, true, true],
    ["operator", theirs, true, true, true, true, true, true],
    ["admin", theirs, true, true, true, true, true, true],
    ["nobody", mine, false, false, false, false, false, false],
  ] as const)("%s on %o", (role, s, occupy, extend, release, reason, teardown, promote) => {
    expect(slotActions(who(role), s)).toEqual({
      occupy,
      occupyForOthers: role === "operator" || role === "admin",
      extend,
      release,
      releaseNeedsReason: reason,
      teardown,
      promote,
    });
  });

  it("nobody signed in may do nothing", () => {
    expect(Object.values(slotActions(undefined, mine)).some(Boolean)).toBe(false);
    expect(jobActions(undefined)).toEqual({ cancel: false, resume: false });
  });

  it("cancel and resume are for operators", () => {
    expect(jobActions(who("member"))).toEqual({ cancel: false, resume: false });
    expect(jobActions(who("operator"))).toEqual({ cancel: true, resume: true });
  });

  it("owns a slot by subject id; a name-only occupant is the account of that name, never a token", () => {
    expect(ownsSlot(who("member"), slot({ occupant: "alice", occupant_id: "user:u-alice" }))).toBe(true);
    expect(ownsSlot(who("member"), slot({ occupant: "alice", occupant_id: "token:t-alice" }))).toBe(false);
    expect(ownsSlot(who("member"), slot({ occupant: "alice" }))).toBe(true);
    const tokenAlice: Subject = { id: "token:t-alice", name: "alice", role: "member" };
    expect(ownsSlot(tokenAlice, slot({ occupant: "alice" }))).toBe(false);
    expect(ownsSlot(tokenAlice, slot({ occupant: "alice", occupant_id: "token:t-alice" }))).toBe(true);
    expect(ownsSlot(who("member"), slot({ occupant: undefined }))).toBe(false);
  });
});
