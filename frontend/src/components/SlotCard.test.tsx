import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { slot } from "../test/fakes";
import { slotWarnings } from "../pages/boardModel";
import { SlotCard } from "./SlotCard";

beforeEach(() => setLang("en"));

describe("slot card", () => {
  it("counts a queued reset down to its start with the global ticker, in en and ko (issue 27 item 11)", () => {
    vi.useFakeTimers();
    // The fake clock and the setInterval spy are undone by the shared teardown (src/test/setup.ts), spy first.
    vi.setSystemTime(new Date("2026-01-01T00:00:00Z"));
    const queued = slot({
      lifecycle: "resetting",
      active_job: { id: "j9", kind: "reset", state: "queued", steps_done: 0, steps_total: 5, not_before: "2026-01-01T00:00:23Z" },
    });
    const spy = vi.spyOn(globalThis, "setInterval");
    const { rerender } = render(<ul><SlotCard slot={queued} /></ul>);
    const starts = () => screen.getByTestId("card-job-starts").textContent;
    expect(starts()).toBe("starts in 23s");
    act(() => {
      vi.advanceTimersByTime(3_000);
    });
    expect(starts()).toBe("starts in 20s");
    act(() => setLang("ko"));
    rerender(<ul><SlotCard slot={{ ...queued }} /></ul>);
    expect(starts()).toBe("20초 후 시작");
    act(() => {
      vi.advanceTimersByTime(21_000);
    });
    expect(starts()).toBe("곧 시작");
    expect(spy.mock.calls.length).toBeLessThanOrEqual(1); // the one global ticker, no timer of its own
    // Claimed: running, no start time.
    rerender(<ul><SlotCard slot={{ ...queued, active_job: { ...queued.active_job!, state: "running", not_before: undefined } }} /></ul>);
    expect(screen.queryByTestId("card-job-starts")).toBeNull();
  });

  it("shows a ready slot's app URL, health and commit; a vacant slot that is not ready says what it lacks (issue 23)", () => {
    render(
      <ul>
        <SlotCard
          slot={slot({
            name: "r1", lifecycle: "vacant", occupant: undefined, deadline: undefined, ready: true,
            deployed: { fqdn: "http://app.example.test,http://b.example.test", status: "running:healthy", commit: "0123456789abcdef", job_id: "j1", deployed_at: "2026-01-01T00:00:00Z" },
          })}
        />
        <SlotCard slot={slot({ name: "r2", lifecycle: "vacant", occupant: undefined, deadline: undefined, missing: ["no slot template"], deployed: { fqdn: "javascript:alert(1)", status: "exited:unhealthy", job_id: "j2", deployed_at: "2026-01-01T00:00:00Z" } })} />
      </ul>,
    );
    const [ready, lacking] = screen.getAllByTestId("slot-card");
    expect(ready.querySelector('a[data-testid="app-url"]')?.getAttribute("href")).toBe("http://app.example.test");
    // Coolify's status in words ("running · healthy"); its own word stays the title.
    expect(ready.textContent).toMatch(/running · healthy/);
    expect(ready.querySelector("[data-testid=app-health]")?.getAttribute("title")).toBe("running:healthy");
    expect(ready.textContent).toMatch(/0123456789ab/);
    expect(ready.querySelector('[data-testid="slot-ready"]')).not.toBeNull();
    expect(lacking.querySelector('a[data-testid="app-url"]')).toBeNull();
    // Worded from what the view says, not from the server's English (issue 35 item 2).
    expect(lacking.querySelector('[data-testid="slot-missing"]')?.textContent).toBe("The application is exited:unhealthy, not running and healthy.");
  });

  it("a volume left on the server is on the card as something to clean, in the needs-attention band (issue 35 item 3)", () => {
    render(
      <ul>
        <SlotCard slot={slot({ name: "v1", lifecycle: "vacant", occupant: undefined, deadline: undefined, ready: true, resources: [{ kind: "docker_volume", id: "data-v1" }] })} attention="to_clean" />
      </ul>,
    );
    expect(screen.getByTestId("card-to-clean").textContent).toMatch(/To clean on the server: 1/);
  });

  it("a never-reset vacant slot says so and is offered as it is (issue 35 item 5)", () => {
    render(
      <ul>
        <SlotCard slot={slot({ name: "n1", lifecycle: "vacant", occupant: undefined, deadline: undefined, has_template: true, missing_code: "never_reset" })} onOccupy={() => {}} />
      </ul>,
    );
    const card = screen.getByTestId("slot-card");
    expect(card.querySelector('[data-testid="card-unready"]')?.textContent).toMatch(/Never reset/);
    expect(card.querySelector('[data-testid="slot-missing"]')?.textContent).toMatch(/Not reset to its template yet/);
    const occupy = card.querySelector('[data-testid="card-occupy"]');
    expect(occupy?.textContent).toBe("Occupy as it is (8 h)");
    expect(occupy?.getAttribute("aria-label")).toBe("Occupy as it is (8 h): n1, never reset");
  });

  it("shows lifecycle, occupant, the active job's current step and progress", () => {
    render(
      <ul>
        <SlotCard
          slot={slot({
            lifecycle: "resetting",
            deadline: new Date(Date.now() + 3_600_000).toISOString(),
            active_job: { id: "j9", kind: "reset", state: "running", current_step: "delete_volumes", steps_done: 2, steps_total: 5 },
          })}
        />
      </ul>,
    );
    const card = screen.getByTestId("slot-card");
    expect(card.textContent).toMatch(/Resetting/);
    expect(card.textContent).toMatch(/alice/);
    expect(card.textContent).toMatch(/Delete volumes/);
    expect(card.textContent).toMatch(/step 2 of 5/);
    expect(card.querySelector("time[data-countdown]")).not.toBeNull();
    expect(card.querySelector('a[href="#/jobs/j9"]')).not.toBeNull();
  });

  it("flags remaining resources and an interrupted job, linking the timeline", () => {
    const s = slot({
      lifecycle: "teardown_incomplete",
      recovery: { job_id: "j7", state: "abandoned", completed_steps: ["delete_db"], uncertain_step: "delete_app", remaining: [{ kind: "application", id: "a-1" }] },
    });
    expect(slotWarnings(s)).toEqual({ remaining: 1, interrupted: true, failed: false });
    render(
      <ul>
        <SlotCard slot={s} />
      </ul>,
    );
    expect(screen.getByTestId("warn-remaining").textContent).toMatch(/Resources left: 1/);
    expect(screen.getByTestId("warn-interrupted")).toBeTruthy();
    expect(screen.getByTestId("slot-card").querySelector('a[href="#/jobs/j7"]')).not.toBeNull();
  });

  it("a release cancelled before any step ran is no failure and leaves nothing to flag (issue 14)", () => {
    setLang("ko");
    const s = slot({
      state_reason: "last job cancelled",
        state_reason_code: "last_job",
        state_reason_args: { outcome: "cancelled" },
      recovery: { job_id: "j8", state: "cancelled", completed_steps: [], remaining: [{ kind: "project", id: "p-1" }, { kind: "application", id: "a-1" }, { kind: "database", id: "d-1" }, { kind: "repository", id: "PRJ/s1" }] },
    });
    expect(slotWarnings(s)).toEqual({ remaining: 0, interrupted: false, failed: false });
    render(
      <ul>
        <SlotCard slot={s} />
      </ul>,
    );
    const card = screen.getByTestId("slot-card").textContent ?? "";
    expect(card).not.toMatch(/cancelled|Still there|남은/);
  });

  it("shows no warning for a healthy slot", () => {
    expect(slotWarnings(slot())).toEqual({ remaining: 0, interrupted: false, failed: false });
  });
});
