// The job history's rows (issue 27 item 8): a step's events folded into one
// row per step, the job's own events (queued, claimed, resumed, the outcome)
// as rows of their own. A reset emits StepStarted once per resource it
// touches (every env var, every volume), so a 1-second reset was 23
// identical "Step started" cards.
import type { RecordedEvent, StepView } from "../services/jobs";

export interface StepGroup {
  kind: "step";
  step: string;
  events: RecordedEvent[];
  /** The attempts that ran the step, in order (a resume runs it again). */
  attempts: number[];
  /** The step's running time in ms: per attempt, its first event to its last, summed (the wait between attempts is not the step's). */
  ms: number;
  /** done, failed, running, uncertain, pending: the job view's word when it has the step, else read from the events. */
  outcome: string;
}

export interface EventRow {
  kind: "event";
  event: RecordedEvent;
}

export type HistoryRow = StepGroup | EventRow;

/** stepOf is the step an event belongs to, "" for a job-level event. */
export function stepOf(e: RecordedEvent): string {
  const d = e.data as { step?: unknown } | null;
  return d && typeof d === "object" && typeof d.step === "string" ? d.step : "";
}

function attemptOf(e: RecordedEvent): number {
  const d = e.data as { attempt?: unknown } | null;
  return d && typeof d === "object" && typeof d.attempt === "number" ? d.attempt : 0;
}

function timeOf(e: RecordedEvent): number {
  return e.meta?.time ? Date.parse(e.meta.time) : NaN;
}

/** outcomeFromEvents reads a step's outcome from its own events (last word wins). */
function outcomeFromEvents(evs: readonly RecordedEvent[]): string {
  const last = evs[evs.length - 1];
  if (last.type === "StepFailed") return (last.data as { uncertain?: boolean }).uncertain ? "uncertain" : "failed";
  if (last.type === "StepStarted") return "running";
  return "done";
}

/**
 * groupHistory turns events (in log order) into rows: one per step, at the
 * place of its first event, holding every event of that step; every other
 * event a row of its own.
 */
export function groupHistory(events: readonly RecordedEvent[], steps: readonly StepView[] = [], uncertain?: string): HistoryRow[] {
  const rows: HistoryRow[] = [];
  const byStep = new Map<string, StepGroup>();
  for (const e of events) {
    const step = stepOf(e);
    if (!step) {
      rows.push({ kind: "event", event: e });
      continue;
    }
    let g = byStep.get(step);
    if (!g) {
      g = { kind: "step", step, events: [], attempts: [], ms: 0, outcome: "" };
      byStep.set(step, g);
      rows.push(g);
    }
    g.events.push(e);
    const a = attemptOf(e);
    if (a > 0 && !g.attempts.includes(a)) g.attempts.push(a);
  }
  const view = new Map(steps.map((s) => [s.name, s]));
  for (const g of byStep.values()) {
    const spans = new Map<number, [number, number]>();
    for (const e of g.events) {
      const at = timeOf(e);
      if (Number.isNaN(at)) continue;
      const a = attemptOf(e);
      const s = spans.get(a);
      spans.set(a, s ? [Math.min(s[0], at), Math.max(s[1], at)] : [at, at]);
    }
    g.ms = [...spans.values()].reduce((sum, [from, to]) => sum + (to - from), 0);
    const v = view.get(g.step);
    g.outcome = v ? (g.step === uncertain && v.state !== "done" ? "uncertain" : v.state) : outcomeFromEvents(g.events);
  }
  return rows;
}
