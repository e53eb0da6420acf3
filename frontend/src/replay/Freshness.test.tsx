import { render, screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { applySnapshot } from "../live/store";
import { jsonResponse } from "../test/fakes";
import { FreshnessBadge, freshState } from "./Freshness";

let answer: Record<string, unknown>;
let urls: string[];

beforeEach(() => {
  setLang("en");
  urls = [];
  answer = { head: 40, read_model: 40, rebuilding: false, position: 40, behind_events: 0, behind_seconds: 0, server_time: "2026-01-01T00:00:00Z" };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      urls.push(url);
      return jsonResponse(answer);
    }),
  );
});

describe("freshState", () => {
  const base = { head: 50, read_model: 50, rebuilding: false, position: 38, behind_events: 12, behind_seconds: 3.4, server_time: "" };
  it("is behind by events and seconds", () => {
    expect(freshState(base)).toEqual({ kind: "behind", events: 12, seconds: 3 });
  });
  it("is live when nothing is missing or what is missing is in flight", () => {
    expect(freshState({ ...base, behind_events: 0, behind_seconds: 0 }).kind).toBe("live");
    expect(freshState({ ...base, behind_events: 1, behind_seconds: 0.2 }).kind).toBe("live");
  });
  it("says a rebuilding read model is rebuilding", () => {
    expect(freshState({ ...base, rebuilding: true, read_model: 10 })).toEqual({ kind: "rebuilding", position: 10, head: 50 });
  });
  it("is unknown without an answer", () => {
    expect(freshState(undefined).kind).toBe("unknown");
  });
});

describe("FreshnessBadge", () => {
  it("asks with the page's position and shows how far behind it is", async () => {
    applySnapshot({ position: 38, slots: [], server_time: "2026-01-01T00:00:00Z" });
    answer = { ...answer, head: 50, read_model: 50, position: 38, behind_events: 12, behind_seconds: 3 };
    render(<FreshnessBadge />);
    await waitFor(() => expect(screen.getByTestId("freshness").textContent).toBe("12 events / 3 s behind"));
    expect(urls).toContain("/api/freshness?position=38");
  });
  it("shows live, and rebuilding in Korean", async () => {
    const { unmount } = render(<FreshnessBadge />);
    await waitFor(() => expect(screen.getByTestId("freshness").dataset.state).toBe("live"));
    unmount();
    setLang("ko");
    answer = { ...answer, rebuilding: true, read_model: 7, head: 40 };
    render(<FreshnessBadge />);
    await waitFor(() => expect(screen.getByTestId("freshness").textContent).toBe("읽기 모델 재구성 중 (40 중 7)"));
  });
});
