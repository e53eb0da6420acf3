// Reconciliation (issue 15, docs/reconcile.md): GET /api/reconcile, a run,
// and the adopt and delete actions on a finding with their plans.
import * as v from "valibot";
import { query, request } from "./http";
import { jobAccepted } from "./jobs";
import { Plan } from "./slots";
import { decoder, int, list, optStr, str, strMap } from "./wire";

export type FindingClass = "orphan" | "drift" | "unknown" | "resolved";

export const Finding = v.object({
  run_id: v.optional(str, ""),
  class: v.picklist(["orphan", "drift", "unknown", "resolved"]),
  /** coolify | bitbucket */
  provider: str,
  kind: str,
  id: str,
  name: optStr,
  /** "coolify:<project uuid>" or "bitbucket:<KEY>" */
  scope: v.optional(str, ""),
  slot: optStr,
  detail: optStr,
  /** An unknown finding's failure as a code (events.FailureProvider, args provider, problem, status); detail is the reconciler's English. */
  error_code: optStr,
  error_args: v.optional(strMap),
  since: v.optional(str, ""),
});
export type Finding = v.InferOutput<typeof Finding>;

export const ReconcileRun = v.object({
  id: str,
  state: v.picklist(["running", "done", "failed"]),
  started_at: str,
  ended_at: optStr,
  scope: list(str),
  counts: v.optional(v.nullable(v.record(v.string(), int)), null),
  /** The server's own English; the page words error_code (events.FailureReconcile*) and folds this. */
  error: optStr,
  error_code: optStr,
  error_args: v.optional(strMap),
});
export type ReconcileRun = v.InferOutput<typeof ReconcileRun>;

export const ReconcileReport = v.object({
  run: v.optional(v.nullable(ReconcileRun), null),
  findings: list(Finding),
  position: int,
  /** The providers' base URLs, for links (empty when not configured). */
  links: v.optional(v.object({ coolify: optStr, bitbucket: optStr })),
});
export type ReconcileReport = v.InferOutput<typeof ReconcileReport>;

export const AdoptPlan = v.object({ ...Plan.entries, finding: Finding });
export type AdoptPlan = v.InferOutput<typeof AdoptPlan>;

export interface AdoptTarget {
  provider: string;
  kind: string;
  id: string;
}

const report = decoder(ReconcileReport, "reconcile report");
const adoptPlan = decoder(AdoptPlan, "adopt plan");
const requested = decoder(v.object({ status: str }), "reconcile run answer");

export const reconcileService = {
  report: (signal?: AbortSignal) => request("/api/reconcile", report, { signal }),
  run: () => request("/api/reconcile/run", requested, { method: "POST" }),
  planAdopt: (slot: string, target: AdoptTarget, signal?: AbortSignal) =>
    request(`/api/reconcile/adopt/plan${query({ slot, ...target })}`, adoptPlan, { signal }),
  adopt: (slot: string, target: AdoptTarget) => request("/api/reconcile/adopt", jobAccepted, { method: "POST", body: { slot, ...target } }),
  planDeleteOrphan: (slot: string, target: AdoptTarget, signal?: AbortSignal) =>
    request(`/api/reconcile/delete/plan${query({ slot, ...target })}`, adoptPlan, { signal }),
  deleteOrphan: (slot: string, target: AdoptTarget) =>
    request("/api/reconcile/delete", jobAccepted, { method: "POST", body: { slot, ...target } }),
};
