// Slots (docs/api.md "Routes"): the slot view (projections.SlotView), the
// commands on a slot, and a command's dry run (the plan).
import * as v from "valibot";
import { enc, query, request } from "./http";
import { jobAccepted } from "./jobs";
import { SlotPR } from "./pullrequests";
import { RepoRef, Resource } from "./resources";
import { decoder, int, list, listOf, optStr, str, strMap } from "./wire";

/** Slot lifecycles (projections.Lifecycle*). */
export const LIFECYCLES = [
  "vacant",
  "occupied",
  "resetting",
  "tearing_down",
  "promoting",
  "teardown_incomplete",
  "retired",
] as const;
export type Lifecycle = (typeof LIFECYCLES)[number];

export const JobRef = v.object({
  id: str,
  kind: str,
  state: str,
  current_step: optStr,
  steps_done: int,
  steps_total: int,
  /** When a queued job may start (the end of the grace period); absent once it runs. */
  not_before: optStr,
});
export type JobRef = v.InferOutput<typeof JobRef>;

export const Recovery = v.object({
  job_id: str,
  state: str,
  completed_steps: list(str),
  uncertain_step: optStr,
  remaining: list(Resource),
});
export type Recovery = v.InferOutput<typeof Recovery>;

/** A delete the provider accepted (queued / 202) that is not confirmed yet. */
export const PendingDelete = v.object({ kind: str, id: str, accepted_at: str, job_id: str });
export type PendingDelete = v.InferOutput<typeof PendingDelete>;

/** Deployed is the application a ready reset deployed. */
export const Deployed = v.object({
  fqdn: optStr,
  status: str,
  /** Running with no health check (Coolify's running:unknown, issue 32). */
  no_health_check: v.optional(v.boolean()),
  commit: optStr,
  job_id: str,
  deployed_at: str,
});
export type Deployed = v.InferOutput<typeof Deployed>;

export const SlotView = v.object({
  name: str,
  lifecycle: str,
  occupant: optStr,
  /** occupant_id: the occupant's subject id, when the server records it (additive). */
  occupant_id: optStr,
  occupied_at: optStr,
  deadline: optStr,
  project_uuid: str,
  app_uuid: str,
  db_uuid: str,
  repo: RepoRef,
  template_repo: RepoRef,
  template_ref: str,
  branch: str,
  active_job: v.optional(JobRef),
  latest_jobs: v.optional(v.nullable(v.record(v.string(), JobRef)), null),
  resources: list(Resource),
  /** Resources whose delete the provider accepted and nobody confirmed yet. */
  deleting: v.optional(v.array(PendingDelete)),
  promoted_to: v.optional(v.array(RepoRef)),
  /** The server's English reason (shown as written when it sends no code: an older server). */
  state_reason: optStr,
  /** The reason as a code and its arguments, said in words by the dashboard's dictionaries. */
  state_reason_code: optStr,
  state_reason_args: v.optional(strMap),
  recovery: v.optional(Recovery),
  /** The slot stream's revision: it does not move on its jobs' events. */
  revision: int,
  updated_at: str,
  /**
   * The store position of the last event that changed this view (the slot's
   * own events and its jobs' events alike). It moves whenever any field
   * moves: the version clients compare.
   */
  position: int,
  /** Registered with a template: a reset brings the slot back to it (issue 23). */
  has_template: v.optional(v.boolean()),
  /** What the newest ready reset deployed. */
  deployed: v.optional(Deployed),
  /** A vacant slot whose last reset brought it back to its template, running (healthy, or with no health check). */
  ready: v.optional(v.boolean()),
  /** For a vacant slot that is not ready: what it lacks. */
  missing: v.optional(v.array(str)),
  /** The same as a code (projections.Missing*) and its arguments, worded by the dictionaries (issue 35). */
  missing_code: optStr,
  missing_args: v.optional(strMap),
  /** The pull request holding the slot (issue 34). */
  pull_request: v.optional(SlotPR),
});
export type SlotView = v.InferOutput<typeof SlotView>;

export const TargetCheck = v.object({
  repo: RepoRef,
  /** exists | free | unknown (could not check) */
  state: str,
  error: optStr,
});
export type TargetCheck = v.InferOutput<typeof TargetCheck>;

export const Plan = v.object({
  kind: str,
  slot: str,
  steps: list(str),
  resources: list(Resource),
  not_before: str,
  /** A promote's target as the git host answered the plan's lookup. */
  target: v.optional(TargetCheck),
});
export type Plan = v.InferOutput<typeof Plan>;

/** Occupant: someone a slot can be occupied for (GET /api/occupants). */
export const Occupant = v.object({ id: str, name: str, kind: v.picklist(["user", "token"]) });
export type Occupant = v.InferOutput<typeof Occupant>;

const occupants = listOf(Occupant, "occupants", "occupant list");

const slot = decoder(SlotView, "slot view");
const slots = decoder(v.object({ slots: list(SlotView), position: int }), "slot list");
const plan = decoder(Plan, "plan");

/**
 * A command on a slot answers its view; when its events are recorded but
 * the read model cannot show them yet, 202 {"slot","recorded":true} — then
 * there is no view to show (undefined) and the stream brings it.
 */
const slotAfterCommand = decoder(
  v.union([SlotView, v.pipe(v.object({ slot: str, recorded: v.literal(true) }), v.transform(() => undefined))]),
  "slot view",
);

export const slotsService = {
  list: (signal?: AbortSignal) => request("/api/slots", slots, { signal }),
  get: (name: string, signal?: AbortSignal) => request(`/api/slots/${enc(name)}`, slot, { signal }),
  register: (body: unknown) => request("/api/slots", slotAfterCommand, { method: "POST", body }),
  /** occupy: byId names someone else (a subject id from occupants()); omitted: the caller. */
  occupy: (name: string, until: string, byId?: string) =>
    request(`/api/slots/${enc(name)}/occupy`, slotAfterCommand, { method: "POST", body: byId ? { by_id: byId, until } : { until } }),
  /** occupants: whom a slot can be occupied for (operator and above). */
  occupants: (signal?: AbortSignal) => request("/api/occupants", occupants, { signal }),
  extend: (name: string, until: string) => request(`/api/slots/${enc(name)}/extend`, slotAfterCommand, { method: "POST", body: { until } }),
  /** setEarlierDeadline: the explicit, confirmed way to shorten an occupancy (extend only adds). */
  setEarlierDeadline: (name: string, deadline: string) =>
    request(`/api/slots/${enc(name)}/deadline`, slotAfterCommand, { method: "POST", body: { deadline, confirm_earlier: true } }),
  /** release: an operator releasing someone else's slot must give a reason (the server records it). */
  release: (name: string, reason?: string) =>
    request(`/api/slots/${enc(name)}/release`, jobAccepted, { method: "POST", body: reason ? { reason } : {} }),
  teardown: (name: string) => request(`/api/slots/${enc(name)}/teardown`, jobAccepted, { method: "POST" }),
  promote: (name: string, project: string, repoName: string) =>
    request(`/api/slots/${enc(name)}/promote`, jobAccepted, { method: "POST", body: { project, name: repoName } }),
  plan: (name: string, kind: string, params: { project?: string; name?: string } = {}, signal?: AbortSignal) =>
    request(`/api/slots/${enc(name)}/plan${query({ kind, ...params })}`, plan, { signal }),
};
