// Test doubles and factories shared by the component tests.
import type { JobView, StepView } from "../services/jobs";
import type { SlotView } from "../services/slots";
import type { EventSourceLike } from "../live/stream";

/** FakeEventSource records what the stream opened and lets a test push frames. */
export class FakeEventSource implements EventSourceLike {
  static opened: FakeEventSource[] = [];
  readyState = 0;
  onopen: ((ev: Event) => unknown) | null = null;
  onerror: ((ev: Event) => unknown) | null = null;
  closed = false;
  private listeners = new Map<string, ((ev: MessageEvent<string>) => void)[]>();

  constructor(readonly url: string) {
    FakeEventSource.opened.push(this);
  }

  static last(): FakeEventSource {
    const es = FakeEventSource.opened[FakeEventSource.opened.length - 1];
    if (!es) throw new Error("no EventSource opened");
    return es;
  }

  addEventListener(type: string, listener: (ev: MessageEvent<string>) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }

  close(): void {
    this.closed = true;
    this.readyState = 2;
  }

  open(): void {
    this.readyState = 1;
    this.onopen?.(new Event("open"));
  }

  emit(type: string, data: unknown, id?: string): void {
    this.emitRaw(type, JSON.stringify(data), id);
  }

  /** emitRaw pushes a frame's data as written (it need not be JSON). */
  emitRaw(type: string, data: string, id?: string): void {
    const ev = new MessageEvent<string>(type, { data, lastEventId: id ?? "" });
    for (const l of this.listeners.get(type) ?? []) l(ev);
  }

  /** fail simulates an error; closed=true is the browser giving up (non-200). */
  fail(closed: boolean): void {
    this.readyState = closed ? 2 : 0;
    this.onerror?.(new Event("error"));
  }
}

export const fakeFactory = (url: string): FakeEventSource => new FakeEventSource(url);

export function slot(over: Partial<SlotView> = {}): SlotView {
  return {
    name: "s1",
    lifecycle: "occupied",
    occupant: "alice",
    project_uuid: "p-1",
    app_uuid: "a-1",
    db_uuid: "d-1",
    repo: { project: "PRJ", slug: "s1" },
    template_repo: { project: "PRJ", slug: "template" },
    template_ref: "main",
    branch: "main",
    latest_jobs: {},
    resources: [
      { kind: "database", id: "d-1" },
      { kind: "application", id: "a-1" },
    ],
    revision: 1,
    updated_at: "2026-01-01T00:00:00Z",
    ...over,
    // Tests that only say which view is newer by revision keep meaning it.
    position: over.position ?? over.revision ?? 1,
  };
}

export function step(name: string, state: string, over: Partial<StepView> = {}): StepView {
  return { name, state, ...over };
}

export const RESET_STEPS = ["delete_db", "delete_env_vars", "delete_volumes", "force_push_template", "vacate"];

export function job(over: Partial<JobView> = {}): JobView {
  return {
    id: "j1",
    kind: "reset",
    slot: "s1",
    state: "queued",
    requested_by: "alice",
    queued_at: "2026-01-01T00:00:00Z",
    not_before: "2026-01-01T00:05:00Z",
    attempts: [],
    steps: RESET_STEPS.map((s) => step(s, "pending")),
    remaining: [],
    resumable: false,
    cancellable: true,
    revision: 1,
    updated_at: "2026-01-01T00:00:00Z",
    ...over,
    // Tests that only say which view is newer by revision keep meaning it.
    position: over.position ?? over.revision ?? 1,
  };
}

/** jsonResponse builds a fetch answer. */
export function jsonResponse(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}
