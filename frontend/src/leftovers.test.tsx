// One story about leftovers (issue 35 item 3): a volume a succeeded reset
// left on the server is something to clean on the card (counted in "needs
// attention"), the slot, the job and the wait view — with the command —
// and no page says "none" or "every step is confirmed" without it.
import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setAuthForTest } from "./auth/session";
import { SlotCard } from "./components/SlotCard";
import { setLang } from "./i18n";
import { applySnapshot, putJob } from "./live/store";
import { cleanupOf, jobLeftovers, toClean } from "./leftovers";
import { attention, boardCounts, needsAttention } from "./pages/boardModel";
import { JobPage } from "./pages/JobPage";
import { SlotPage } from "./pages/SlotPage";
import { WaitView } from "./pages/WaitView";
import { useOutcome } from "./live/outcome";
import type { LeftVolume } from "./services/jobs";
import { job, jsonResponse, RESET_STEPS, slot, step } from "./test/fakes";

const LEFT: LeftVolume = { storage_uuid: "st-1", volume: "data-s1", server: "the server of Coolify application a-1", cleanup: "docker volume rm data-s1" };
const VOLUME = { kind: "docker_volume", id: "data-s1", name: "the server of Coolify application a-1", name_code: "app_server", name_args: { app: "a-1" } };

/** A succeeded reset of s1 whose delete_volumes left data-s1 on the server; the slot still tracks it. */
const succeeded = job({
  state: "succeeded",
  cancellable: false,
  ended_at: "2026-01-01T00:06:00Z",
  steps: RESET_STEPS.map((s) => step(s, "done", s === "delete_volumes" ? { left_on_server: [LEFT] } : {})),
  remaining: [],
  revision: 20,
});
const vacant = slot({ lifecycle: "vacant", occupant: undefined, deadline: undefined, ready: true, resources: [{ kind: "database", id: "d-2" }, VOLUME], revision: 20 });

beforeEach(() => {
  setAuthForTest({ id: "u-alice", name: "alice", role: "operator" });
  setLang("en");
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      if (url.includes("/events")) return jsonResponse({ events: [] });
      if (url.includes("/api/slots/")) return jsonResponse(url.includes("/jobs") ? { jobs: [] } : vacant);
      if (url.includes("/api/jobs/")) return jsonResponse(succeeded);
      return jsonResponse({});
    }),
  );
});

const flush = () => act(async () => {});

function at(path: string, route: string, el: (p: Record<string, string>) => React.ReactNode) {
  const mem = memoryLocation({ path, record: true });
  render(
    <Router hook={mem.hook}>
      <Route path={route}>{(p) => el(p as Record<string, string>)}</Route>
    </Router>,
  );
  return mem;
}

describe("what a person must clean (projections.RemainingOf's rules)", () => {
  it("a Docker volume, a bind mount's directory, and what an unreachable server kept; nothing Slotkeeper deletes", () => {
    expect(cleanupOf({ kind: "docker_volume", id: "data-1" })).toEqual({ code: "docker_volume_rm", command: "docker volume rm data-1" });
    expect(cleanupOf({ kind: "docker_volume", id: "/srv/data" })).toEqual({ code: "bind_mount_rm" });
    const unreachable = "docker ps -aq --filter name=d-1 | xargs -r docker rm -f";
    expect(cleanupOf({ kind: "docker_container", id: "d-1", cleanup: unreachable })).toEqual({ code: "unreachable_rm", command: unreachable });
    for (const kind of ["database", "application", "env_var", "volume", "repository", "project"]) expect(cleanupOf({ kind, id: "x" })).toBeUndefined();
    expect(toClean(vacant).map((r) => r.id)).toEqual(["data-s1"]);
  });

  it("a job's left volume is to clean while the slot still tracks it", () => {
    expect(jobLeftovers(succeeded, vacant).map((r) => r.id)).toEqual(["data-s1"]);
    expect(jobLeftovers(succeeded, undefined).map((r) => r.id)).toEqual(["data-s1"]);
    expect(jobLeftovers(succeeded, { ...vacant, resources: [{ kind: "database", id: "d-2" }] })).toEqual([]);
  });
});

describe("one story about leftovers (issue 35 item 3)", () => {
  it("the board counts it in needs attention and the card names it in the red band", () => {
    const now = Date.parse("2026-01-01T01:00:00Z");
    expect(attention(vacant, now)).toEqual(["to_clean"]);
    expect(needsAttention(attention(vacant, now))).toBe(true);
    expect(boardCounts([vacant, slot({ name: "s2", lifecycle: "vacant", occupant: undefined, deadline: undefined })], now, undefined).attention).toBe(1);
    render(
      <ul>
        <SlotCard slot={vacant} attention="to_clean" />
      </ul>,
    );
    expect(screen.getByTestId("card-attention").textContent).toMatch(/Needs attention · To clean on the server: 1/);
  });

  it("a succeeded reset's page lists the volume under Remaining resources with the command — never 'none' — in en and ko", async () => {
    applySnapshot({ position: 20, server_time: "", slots: [vacant] });
    putJob(succeeded);
    at("/jobs/j1", "/jobs/:id", (p) => <JobPage id={p.id ?? ""} />);
    await flush();
    await flush();
    const remaining = screen.getByTestId("job-remaining");
    expect(remaining.querySelector('[data-to-clean="true"]')?.getAttribute("data-resource")).toBe("docker_volume:data-s1");
    expect(remaining.textContent).toContain("docker volume rm data-s1");
    expect(remaining.textContent).toContain("Left on the server: clean it up");
    expect(screen.queryByTestId("job-remaining-none")).toBeNull();
    // One list: no second "Left on the server" section above it.
    expect(screen.getAllByTestId("job-left")).toHaveLength(1);
    expect(screen.getByTestId("job-done-left").textContent).toBe("It left 1 on the server to clean: see Remaining resources.");
    act(() => setLang("ko"));
    expect(screen.getByTestId("job-remaining").textContent).toContain("서버에 남음: 정리 필요");
    expect(screen.getByTestId("job-remaining").textContent).not.toMatch(/\b(the|of|server)\b/);
  });

  it("once the slot no longer tracks the volume the job says none is left", async () => {
    applySnapshot({ position: 20, server_time: "", slots: [{ ...vacant, resources: [{ kind: "database", id: "d-2" }] }] });
    putJob(succeeded);
    at("/jobs/j1", "/jobs/:id", (p) => <JobPage id={p.id ?? ""} />);
    await flush();
    expect(screen.getByTestId("job-remaining-none")).toBeTruthy();
    expect(screen.queryByTestId("job-done-left")).toBeNull();
  });

  it("the wait view does not end at 'every step is confirmed': the slot page's notice counts what is left", async () => {
    applySnapshot({ position: 20, server_time: "", slots: [vacant] });
    putJob(succeeded);
    function Said() {
      return <p data-testid="said">{useOutcome("slot:s1")?.text}</p>;
    }
    const mem = at("/jobs/j1/wait", "/jobs/:id/wait", (p) => <WaitView id={p.id ?? ""} />);
    render(<Said />);
    await flush();
    await flush();
    // On success it moves to the slot with the outcome, which names the leftover.
    expect(mem.history?.at(-1)).toBe("/slots/s1");
    const said = screen.getByTestId("said").textContent ?? "";
    expect(said).toMatch(/^The reset of s1 finished in .+; the slot is vacant\. It left 1 on the server to clean: see its resources\.$/);
    expect(said).not.toMatch(/every step is confirmed/);
  });

  it("the slot page marks the volume as something to clean, with the command to copy", async () => {
    applySnapshot({ position: 20, server_time: "", slots: [vacant] });
    at("/slots/s1", "/slots/:name", (p) => <SlotPage name={p.name ?? ""} />);
    await flush();
    const row = document.querySelector('[data-resource="docker_volume:data-s1"]');
    expect(row?.querySelector('[data-testid="slot-cleanup"]')?.textContent).toContain("Left on the server: clean it up");
    expect([...(row?.querySelectorAll("code") ?? [])].map((c) => c.textContent)).toContain("docker volume rm data-s1");
    expect(row?.querySelector('[data-testid="copy-cleanup"]')).not.toBeNull();
  });
});
