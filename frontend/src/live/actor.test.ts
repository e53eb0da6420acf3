import { describe, expect, it } from "vitest";
import { getActor, setActor, validActor } from "./actor";

describe("actor name", () => {
  it("accepts what the server accepts and the browser can send", () => {
    for (const ok of ["alice", "Bob Kim", "ops-bot_2", "a.b@c+d"]) expect(validActor(ok), ok).toBe(true);
    for (const bad of ["", " lead", "trail ", "홍길동", "a/b", "x".repeat(65), "semi;colon"]) expect(validActor(bad), bad).toBe(false);
  });

  it("persists a valid name and refuses an invalid one without changing the stored name", () => {
    expect(setActor("  alice ")).toBe(true);
    expect(getActor()).toBe("alice");
    expect(localStorage.getItem("slotkeeper.actor")).toBe("alice");
    expect(setActor("홍길동")).toBe(false);
    expect(getActor()).toBe("alice");
  });
});
