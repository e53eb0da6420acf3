import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import type { RemainingResource } from "../services/resources";
import { setProviderLinks } from "../auth/links";
import { setLang } from "../i18n";
import { applySnapshot } from "../live/store";
import { jsonResponse, slot } from "../test/fakes";
import { RemainingPage } from "./RemainingPage";

const row = (s: string, lifecycle: string, kind: string, id: string, job_id?: string): RemainingResource => ({ slot: s, lifecycle, resource: { kind, id }, job_id });

beforeEach(() => {
  setLang("en");
  setProviderLinks({ coolify: "https://coolify.example", bitbucket: "https://bb.example" });
  vi.stubGlobal(
    "fetch",
    vi.fn(async () =>
      jsonResponse({
        // The server's order: by slot, kind, id.
        resources: [
          row("a", "occupied", "database", "db-a"),
          row("b", "vacant", "database", "db-b", "job-b"),
          row("b", "vacant", "repository", "SLOT/slot-b", "job-b"),
          row("c", "teardown_incomplete", "project", "proj-c", "job-c"),
        ],
      }),
    ),
  );
  applySnapshot({
    position: 5,
    server_time: "",
    slots: [
      slot({ name: "a", lifecycle: "occupied", project_uuid: "proj-a", position: 1 }),
      slot({ name: "b", lifecycle: "vacant", project_uuid: "proj-b", position: 2, recovery: { job_id: "job-b", state: "failed", completed_steps: [], remaining: [] } }),
      slot({ name: "c", lifecycle: "teardown_incomplete", project_uuid: "proj-c", position: 3 }),
    ],
  });
});

const flush = () => act(async () => {});

function mount() {
  render(
    <Router hook={memoryLocation({ path: "/remaining" }).hook}>
      <RemainingPage />
    </Router>,
  );
}

describe("remaining resources", () => {
  it("lists the slots in trouble first, says why in words, and can hide the healthy ones", async () => {
    mount();
    await flush();
    const rows = () => screen.getAllByTestId("remaining-row").map((r) => `${r.querySelector("a")?.textContent}:${r.getAttribute("data-problem")}`);
    expect(rows()).toEqual(["b:failed", "b:failed", "c:teardown_incomplete", "a:"]);
    expect(screen.getAllByTestId("remaining-row")[0]?.textContent).toContain("Last job did not succeed");
    expect(screen.getByTestId("remaining-summary").textContent).toContain("3 resources belong to slots that need attention");
    fireEvent.click(screen.getByTestId("hide-healthy"));
    expect(rows()).toEqual(["b:failed", "b:failed", "c:teardown_incomplete"]);
  });

  it("a volume left on the server is something to clean, counted, with its command (issue 35 item 3)", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () =>
        jsonResponse({
          resources: [{ slot: "a", lifecycle: "vacant", resource: { kind: "docker_volume", id: "data-a" }, job_id: "job-a", cleanup: "on the server: docker volume rm data-a (English)", cleanup_code: "docker_volume_rm", cleanup_command: "docker volume rm data-a" }],
        }),
      ),
    );
    applySnapshot({ position: 7, server_time: "", slots: [slot({ name: "a", lifecycle: "vacant", position: 7 })] });
    mount();
    await flush();
    const r = screen.getByTestId("remaining-row");
    expect(r.getAttribute("data-problem")).toBe("to_clean");
    expect(r.textContent).toContain("Left on the server: clean it up");
    expect(screen.getByTestId("cleanup").textContent).toContain("docker volume rm data-a");
    expect(screen.getByTestId("cleanup").textContent).not.toContain("English");
    // Never "no slot needs attention" above a volume whose data is still there.
    expect(screen.getByTestId("remaining-summary").textContent).toContain("1 resources belong to slots that need attention");
  });

  it("does not count a job cancelled before it started as trouble", async () => {
    applySnapshot({
      position: 6,
      server_time: "",
      slots: [slot({ name: "b", lifecycle: "vacant", position: 6, recovery: { job_id: "job-b", state: "cancelled", completed_steps: [], remaining: [] } })],
    });
    mount();
    await flush();
    const b = screen.getAllByTestId("remaining-row").filter((r) => r.querySelector("a")?.textContent === "b");
    expect(b.map((r) => r.getAttribute("data-problem"))).toEqual(["", ""]);
  });

  it("links each id to its page at the provider, and copies it", async () => {
    const writeText = vi.fn(async () => {});
    vi.stubGlobal("navigator", { ...navigator, clipboard: { writeText } });
    mount();
    await flush();
    const links = screen.getAllByTestId("resource-link").map((a) => a.getAttribute("href"));
    expect(links).toEqual([
      "https://coolify.example/project/proj-b",
      "https://bb.example/projects/SLOT/repos/slot-b/browse",
      "https://coolify.example/project/proj-c",
      "https://coolify.example/project/proj-a",
    ]);
    const copy = screen.getAllByTestId("copy-id")[1]!;
    expect(copy.getAttribute("aria-label")).toBe("Copy SLOT/slot-b");
    await act(async () => {
      fireEvent.click(copy);
    });
    expect(writeText).toHaveBeenCalledWith("SLOT/slot-b");
    expect(copy.textContent).toBe("Copied");
  });

  it("shows ids without links when the server names no provider address", async () => {
    setProviderLinks(undefined);
    mount();
    await flush();
    expect(screen.queryAllByTestId("resource-link")).toHaveLength(0);
    expect(screen.getAllByTestId("resource-id")).toHaveLength(4);
  });
});
