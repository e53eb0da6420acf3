// Reconciliation (issue 15): GET /api/reconcile and the adopt action.
import type { Plan } from "./types";

export type FindingClass = "orphan" | "drift" | "unknown" | "resolved";

export interface Finding {
  run_id: string;
  class: FindingClass;
  provider: "coolify" | "bitbucket" | string;
  kind: string;
  id: string;
  name?: string;
  /** "coolify:<project uuid>" or "bitbucket:<KEY>" */
  scope: string;
  slot?: string;
  detail?: string;
  since: string;
}

export interface ReconcileRun {
  id: string;
  state: "running" | "done" | "failed";
  started_at: string;
  ended_at?: string;
  scope: string[] | null;
  counts: Record<string, number> | null;
  error?: string;
}

export interface ReconcileReport {
  run: ReconcileRun | null;
  findings: Finding[] | null;
  position: number;
  /** The providers' base URLs, for links (empty when not configured). */
  links?: { coolify?: string; bitbucket?: string };
}

export interface AdoptPlan extends Plan {
  finding: Finding;
}

export interface AdoptTarget {
  provider: string;
  kind: string;
  id: string;
}
