import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setLang } from "../i18n";
import { jsonResponse } from "../test/fakes";
import { ResetLookup } from "./ResetLookup";

let answer: () => Response;

beforeEach(() => {
  setLang("en");
  vi.stubGlobal(
    "fetch",
    vi.fn(async () => answer()),
  );
});

function mount() {
  const mem = memoryLocation({ path: "/slots/s1/reset", record: true });
  render(
    <Router hook={mem.hook}>
      <Route path="/slots/:name/reset">{(p) => <ResetLookup slot={p.name} />}</Route>
    </Router>,
  );
  return mem.history;
}

describe("reset lookup", () => {
  it("says the slot has no release job when the server answers 404, not 'cannot verify' (issue 14)", async () => {
    answer = () => jsonResponse({ error: { code: "not_found", message: "no reset job of s1" } }, 404);
    const history = mount();
    await act(async () => {});
    expect(screen.getByTestId("no-reset").textContent).toMatch(/s1 has no release \(reset\) job/);
    expect(screen.queryByTestId("cannot-verify")).toBeNull();
    expect(history).toEqual(["/slots/s1/reset"]);
  });

  it("says 'cannot verify' only when the server could not answer", async () => {
    answer = () => {
      throw new TypeError("Failed to fetch");
    };
    mount();
    await act(async () => {});
    expect(screen.getByTestId("cannot-verify")).toBeTruthy();
  });
});
