import { describe, expect, it } from "vitest";
import { job, slot } from "../test/fakes";
import { serverOffset } from "./clock";
import { AUDIT_KEEP, applyChange, applySnapshot, getLiveState, putJob, putSlot as putSlotView, subscribeLive } from "./store";

describe("live store", () => {
  it("applies a snapshot, then changes after its position", () => {
    applySnapshot({ position: 10, server_time: new Date().toISOString(), slots: [slot({ name: "a" }), slot({ name: "b" })] });
    expect(getLiveState().ready).toBe(true);
    expect([...getLiveState().slots.keys()]).toEqual(["a", "b"]);
    expect(applyChange({ position: 11, slot: slot({ name: "a", lifecycle: "resetting", revision: 2 }) })).toBe(true);
    expect(getLiveState().slots.get("a")?.lifecycle).toBe("resetting");
    expect(getLiveState().position).toBe(11);
  });

  it("drops changes at or below the applied position (duplicates of a resume)", () => {
    applySnapshot({ position: 10, server_time: "", slots: [slot({ name: "a" })] });
    expect(applyChange({ position: 10, slot: slot({ name: "a", lifecycle: "vacant", revision: 5 }) })).toBe(false);
    expect(applyChange({ position: 9, slot: slot({ name: "a", lifecycle: "vacant", revision: 5 }) })).toBe(false);
    expect(getLiveState().slots.get("a")?.lifecycle).toBe("occupied");
  });

  it("keeps the view with the highest revision", () => {
    applySnapshot({ position: 1, server_time: "", slots: [] });
    applyChange({ position: 2, job: job({ revision: 4, state: "running" }) });
    applyChange({ position: 3, job: job({ revision: 3, state: "queued" }) });
    expect(getLiveState().jobs.get("j1")?.state).toBe("running");
    putJob(job({ revision: 2, state: "queued" }));
    expect(getLiveState().jobs.get("j1")?.state).toBe("running");
    putJob(job({ revision: 9, state: "succeeded" }));
    expect(getLiveState().jobs.get("j1")?.state).toBe("succeeded");
  });

  it("follows a slot's job step by step although the slot's revision stays the same (issue 12 item 3)", () => {
    applySnapshot({ position: 10, server_time: "", slots: [slot({ name: "a", revision: 3, position: 10 })] });
    // JobAccepted is the slot stream's event (revision 4); JobQueued,
    // JobClaimed and StepStarted are the job's: the slot's revision stays 4
    // while its active job moves on.
    const progress = [
      { state: "queued", steps_done: 0, steps_total: 0 },
      { state: "queued", steps_done: 0, steps_total: 5 },
      { state: "running", steps_done: 0, steps_total: 5 },
      { state: "running", steps_done: 0, steps_total: 5, current_step: "delete_db" },
      { state: "running", steps_done: 1, steps_total: 5, current_step: "delete_env_vars" },
    ];
    progress.forEach((p, i) => {
      const pos = 11 + i;
      const active = { id: "j1", kind: "reset", ...p };
      expect(applyChange({ position: pos, slot: slot({ name: "a", revision: 4, position: pos, active_job: active }) })).toBe(true);
      expect(getLiveState().slots.get("a")?.active_job).toEqual(active);
    });
    // A REST answer or a snapshot older than what the page shows does not win
    // just because its revision is the same.
    putSlotView(slot({ name: "a", revision: 4, position: 12, active_job: { id: "j1", kind: "reset", state: "queued", steps_done: 0, steps_total: 5 } }));
    applySnapshot({ position: 15, server_time: "", slots: [slot({ name: "a", revision: 4, position: 13 })] });
    expect(getLiveState().slots.get("a")?.active_job?.current_step).toBe("delete_env_vars");
  });

  it("does not let a snapshot roll a slot back to an older revision", () => {
    applySnapshot({ position: 1, server_time: "", slots: [slot({ name: "a", revision: 1 })] });
    applyChange({ position: 2, slot: slot({ name: "a", revision: 7, lifecycle: "vacant" }) });
    applySnapshot({ position: 2, server_time: "", slots: [slot({ name: "a", revision: 6 })] });
    expect(getLiveState().slots.get("a")?.revision).toBe(7);
  });

  it("does not move the board back to a snapshot older than its position (a lagging server process)", () => {
    applySnapshot({ position: 20, server_time: "", slots: [slot({ name: "a", revision: 3, lifecycle: "vacant" })] });
    applyChange({ position: 21, slot: slot({ name: "a", revision: 4, lifecycle: "resetting" }) });
    applyChange({ position: 22, job: job({ revision: 2, state: "running" }) });
    const before = getLiveState();
    let n = 0;
    const off = subscribeLive(() => n++);
    // Another process, whose projection is at 10, answers the reconnect.
    const applied = applySnapshot({
      position: 10,
      server_time: "",
      slots: [slot({ name: "a", revision: 2, lifecycle: "occupied" }), slot({ name: "b", revision: 1 })],
    });
    off();
    expect(applied).toBe(false);
    expect(getLiveState()).toBe(before);
    expect(n).toBe(0);
    expect(getLiveState().position).toBe(22);
    expect(getLiveState().slots.get("a")?.lifecycle).toBe("resetting");
    expect(getLiveState().slots.has("b")).toBe(false);
    // Changes after the position still apply, and a snapshot at or past it too.
    expect(applyChange({ position: 23, slot: slot({ name: "a", revision: 5, lifecycle: "vacant" }) })).toBe(true);
    expect(applySnapshot({ position: 23, server_time: "", slots: [slot({ name: "a", revision: 5, lifecycle: "vacant" })] })).toBe(true);
  });

  it("replaces everything with a log_reset snapshot even when its position is older (another log)", () => {
    applySnapshot({ position: 500, server_time: "", slots: [slot({ name: "a", revision: 90 }), slot({ name: "old" })] });
    applyChange({ position: 501, job: job({ revision: 9, state: "running" }) });
    const epoch = getLiveState().epoch;
    expect(applySnapshot({ position: 4, server_time: "", slots: [slot({ name: "a", revision: 2 })], log_reset: true })).toBe(true);
    const s = getLiveState();
    expect(s.position).toBe(4);
    expect(s.slots.get("a")?.revision).toBe(2);
    expect(s.slots.has("old")).toBe(false);
    expect(s.jobs.size).toBe(0);
    expect(s.audit).toHaveLength(0);
    expect(s.epoch).toBe(epoch + 1);
    expect(applyChange({ position: 5, slot: slot({ name: "a", revision: 3, lifecycle: "vacant" }) })).toBe(true);
  });

  it("bumps the epoch on every snapshot so pages refetch job views", () => {
    const e0 = getLiveState().epoch;
    applySnapshot({ position: 1, server_time: "", slots: [] });
    applySnapshot({ position: 5, server_time: "", slots: [] });
    expect(getLiveState().epoch).toBe(e0 + 2);
  });

  it("keeps unchanged slots by reference, so their cards do not re-render", () => {
    applySnapshot({ position: 1, server_time: "", slots: [slot({ name: "a" }), slot({ name: "b" })] });
    const b = getLiveState().slots.get("b");
    applyChange({ position: 2, slot: slot({ name: "a", revision: 2 }) });
    expect(getLiveState().slots.get("b")).toBe(b);
  });

  it("bounds the live audit feed", () => {
    applySnapshot({ position: 0, server_time: "", slots: [] });
    for (let i = 1; i <= AUDIT_KEEP + 20; i++) {
      applyChange({ position: i, audit: { position: i, stream: "s", type: "T", time: "", summary: "" } });
    }
    const audit = getLiveState().audit;
    expect(audit).toHaveLength(AUDIT_KEEP);
    expect(audit[audit.length - 1].position).toBe(AUDIT_KEEP + 20);
  });

  it("learns the server clock offset from the snapshot", () => {
    const ahead = new Date(Date.now() + 60_000).toISOString();
    applySnapshot({ position: 1, server_time: ahead, slots: [] });
    expect(serverOffset()).toBeGreaterThan(59_000);
    expect(serverOffset()).toBeLessThan(61_000);
  });

  it("notifies subscribers once per applied change and not for dropped ones", () => {
    applySnapshot({ position: 5, server_time: "", slots: [] });
    let n = 0;
    const off = subscribeLive(() => n++);
    applyChange({ position: 6, slot: slot() });
    applyChange({ position: 6, slot: slot() });
    off();
    expect(n).toBe(1);
  });
});
