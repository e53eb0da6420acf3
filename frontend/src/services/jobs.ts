// Jobs (docs/api.md "Jobs"): the job view, its raw events, the lists
// across slots and per slot, and cancel and resume.
import * as v from "valibot";
import { enc, query, request } from "./http";
import { Resource } from "./resources";
import { decoder, int, list, optStr, str, strMap } from "./wire";
// The job vocabulary's lists are generated from the Go source
// (frontend/src/generated/vocabulary.ts, checked in make test): a kind,
// step or state added on the server reaches every list here.
import * as vocab from "../generated/vocabulary";

/** Job states (events.Statuses). */
export const JOB_STATES = vocab.JOB_STATES;
/** Step states (projections.Step*). */
export const STEP_STATES = vocab.STEP_STATES;
/** Job kinds (events.JobKinds). */
export const JOB_KINDS = vocab.JOB_KINDS;
/** Step names, each kind's in the order it runs them (events.StepOrder). */
export const STEP_NAMES = vocab.STEP_NAMES;
export type JobState = (typeof JOB_STATES)[number];
export type StepState = (typeof STEP_STATES)[number];
export type JobKind = (typeof JOB_KINDS)[number];

/** Terminal job states: nothing changes them except a resume. */
export const TERMINAL_STATES: ReadonlySet<string> = new Set(vocab.ENDED_STATES);

/** Job states that ended without success. */
export const UNSUCCESSFUL_STATES: ReadonlySet<string> = new Set(vocab.UNSUCCESSFUL_STATES);

/** Ended states a job of any kind may be resumed from (a cancelled teardown that had started may be too). */
export const RESUMABLE_STATES: ReadonlySet<string> = new Set(vocab.RESUMABLE_STATES);

export const Attempt = v.object({
  number: int,
  worker: str,
  claimed_at: str,
  lease_until: str,
  ended_at: optStr,
  outcome: optStr,
});
export type Attempt = v.InferOutput<typeof Attempt>;

export const LeftVolume = v.object({
  storage_uuid: str,
  volume: optStr,
  host_path: optStr,
  server: str,
  cleanup: str,
});
export type LeftVolume = v.InferOutput<typeof LeftVolume>;

export const StepWait = v.object({
  phase: str,
  since: str,
  ahead: v.optional(int),
  building: v.optional(int),
  status: optStr,
  deployment_uuid: optStr,
  db_uuid: optStr,
  url: optStr,
});
export type StepWait = v.InferOutput<typeof StepWait>;

export const StepView = v.object({
  name: str,
  state: str,
  attempt: v.optional(int),
  started_at: optStr,
  ended_at: optStr,
  http_status: v.optional(int),
  error: optStr,
  /** The failure as a code (events.Failure*) and its parts; format.failureText words it, error is the provider's own text. */
  error_code: optStr,
  error_args: v.optional(strMap),
  resource: v.optional(Resource),
  detail: optStr,
  /** The detail as a code when it is one of the server's own sentences (events.Detail*); format.stepDetail words it. */
  detail_code: optStr,
  /** detail_code's parts (issue 35). */
  detail_args: v.optional(strMap),
  /** What the step left on the server (its API cannot delete it), with the manual clean-up. */
  left_on_server: v.optional(v.array(LeftVolume)),
  /** The phase of the step's wait on the provider (issue 32), as last recorded. */
  wait: v.optional(StepWait),
  /** The application runs without a health check (Coolify's running:unknown). */
  no_health_check: v.optional(v.boolean()),
});
export type StepView = v.InferOutput<typeof StepView>;

export const JobView = v.object({
  id: str,
  kind: str,
  slot: str,
  state: str,
  requested_by: str,
  params: v.optional(strMap),
  queued_at: str,
  not_before: str,
  ended_at: optStr,
  attempts: list(Attempt),
  steps: list(StepView),
  uncertain_step: optStr,
  reason: optStr,
  /** reason as a code and parts (the failed step's error_code, error_args). */
  reason_code: optStr,
  reason_args: v.optional(strMap),
  remaining: list(Resource),
  resumable: v.boolean(),
  cancellable: v.boolean(),
  correlation_id: optStr,
  revision: int,
  updated_at: str,
  /** The store position of the job's last event: the version clients compare. */
  position: int,
  queued_position: v.optional(int),
});
export type JobView = v.InferOutput<typeof JobView>;

export const Page = v.object({ jobs: list(JobView), next_cursor: optStr });
export type Page = v.InferOutput<typeof Page>;

export const EventMeta = v.object({
  actor: optStr,
  correlation_id: optStr,
  causation_id: optStr,
  time: optStr,
  schema: v.optional(int),
});
export type EventMeta = v.InferOutput<typeof EventMeta>;

/** One raw event of a job, as GET /api/jobs/{id}/events returns it. */
export const RecordedEvent = v.object({
  position: int,
  stream: str,
  revision: int,
  type: str,
  data: v.unknown(),
  meta: v.optional(v.nullable(EventMeta), null),
});
export type RecordedEvent = v.InferOutput<typeof RecordedEvent>;

/** JobAcceptedResult is the 202 answer of every command that starts a job. */
export const JobAcceptedResult = v.object({
  job_id: str,
  kind: str,
  slot: str,
  not_before: str,
  steps: list(str),
});
export type JobAcceptedResult = v.InferOutput<typeof JobAcceptedResult>;
export const jobAccepted = decoder(JobAcceptedResult, "job accepted answer");

/** JobsFilter is GET /api/jobs's filter; empty fields match everything. */
export interface JobsFilter {
  state?: string;
  kind?: string;
  slot?: string;
  actor?: string;
}

const job = decoder(JobView, "job view");
const page = decoder(Page, "job page");
const jobEvents = decoder(v.object({ events: list(RecordedEvent) }), "job events");
const cancelled = decoder(v.object({ job_id: str }), "cancel answer");

export const jobsService = {
  /** list: every job across slots, newest first (GET /api/jobs); state may also be "uncertain". */
  list: (f: JobsFilter, cursor?: string, signal?: AbortSignal) =>
    request(`/api/jobs${query({ ...f, cursor, limit: 20 })}`, page, { signal }),
  ofSlot: (name: string, kind?: string, cursor?: string, signal?: AbortSignal) =>
    request(`/api/slots/${enc(name)}/jobs${query({ kind, cursor, limit: 20 })}`, page, { signal }),
  latest: (name: string, kind: string, signal?: AbortSignal) =>
    request(`/api/slots/${enc(name)}/jobs/latest${query({ kind })}`, job, { signal }),
  get: (id: string, signal?: AbortSignal) => request(`/api/jobs/${enc(id)}`, job, { signal }),
  /** events: the job's raw events; with after, only those of a later revision. */
  events: (id: string, signal?: AbortSignal, after?: number) =>
    request(`/api/jobs/${enc(id)}/events${query({ after })}`, jobEvents, { signal }),
  cancel: (id: string) => request(`/api/jobs/${enc(id)}/cancel`, cancelled, { method: "POST" }),
  resume: (id: string) => request(`/api/jobs/${enc(id)}/resume`, jobAccepted, { method: "POST" }),
};
