import { render, screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { jsonResponse } from "../test/fakes";
import { adminService } from "../services/admin";
import { ConsumersPanel } from "./ConsumersPanel";

let answer: unknown;
let urls: string[];

beforeEach(() => {
  setLang("en");
  urls = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      urls.push(url);
      return jsonResponse(answer);
    }),
  );
});

describe("the consumers panel on the admin page", () => {
  it("lists each parked event with its consumer, position and why, and a stopped consumer", async () => {
    answer = {
      parked: [
        { consumer: "deadlines", position: 42, stream: "slot-dune", revision: 3, type: "SlotOccupied", event_id: "e1", error: "decode: bad until", at: "2026-12-01T10:00:00Z" },
      ],
      parked_total: 1,
      stopped: { insights: "store refused" },
    };
    render(<ConsumersPanel />);
    await waitFor(() => expect(screen.getAllByTestId("parked-event")).toHaveLength(1));
    expect(urls).toEqual(["/api/admin/consumers"]);
    const row = screen.getByTestId("parked-event").textContent ?? "";
    expect(row).toMatch(/deadlines/);
    expect(row).toMatch(/SlotOccupied · slot-dune@3 · #42/);
    expect(row).toMatch(/decode: bad until/);
    expect(screen.getByTestId("consumers-total").textContent).toMatch(/^1 events parked/);
    // The server's own English (a Go error) is folded under the reader's words.
    expect(screen.getByTestId("consumer-stopped").textContent).toBe("Stopped: insightsOriginal messagestore refused");
    expect(screen.getByTestId("consumer-stopped").querySelector("details pre")?.textContent).toBe("store refused");
    expect(screen.queryByTestId("consumers-none")).toBeNull();
  });

  it("says so when nothing is parked, in Korean too", async () => {
    answer = { parked: [], parked_total: 0, stopped: {} };
    setLang("ko");
    render(<ConsumersPanel />);
    await waitFor(() => expect(screen.getByTestId("consumers-none").textContent).toBe("보류된 이벤트도, 멈춘 소비자도 없습니다."));
  });

  it("checks the wire answer instead of trusting it", async () => {
    answer = { parked: null };
    await expect(adminService.consumers()).resolves.toEqual({ parked: [], parked_total: 0, stopped: {} });
    answer = { parked: "x", parked_total: "2" };
    await expect(adminService.consumers()).rejects.toMatchObject({ code: "malformed" });
  });
});
