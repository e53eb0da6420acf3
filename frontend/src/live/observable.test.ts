import { describe, expect, it } from "vitest";
import { observable, storesAwayFromStart } from "./observable";

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

describe("stores away from their start (the check the shared test teardown makes)", () => {
  it("names a store a test left changed, and where it was made, until it is back", () => {
    const probe = observable({ n: 0 });
    expect(storesAwayFromStart(same)).toEqual([]);
    probe.set({ n: 1 });
    const away = storesAwayFromStart(same);
    expect(away).toHaveLength(1);
    expect(away[0]!.value).toEqual({ n: 1 });
    expect(away[0]!.initial).toEqual({ n: 0 });
    expect(away[0]!.where).toContain("observable.test.ts");
    // Back at its start (a copy is as good): nothing to report, and the
    // shared teardown after this test finds nothing either.
    probe.set({ n: 0 });
    expect(storesAwayFromStart(same)).toEqual([]);
  });
});
