// Wire types of the Slotkeeper API. They mirror the json tags of
// projections/views.go and backend/slots/api.go (docs/api.md is the contract).

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

/** Job states (projections.Job*). */
export const JOB_STATES = [
  "queued",
  "running",
  "succeeded",
  "failed",
  "timed_out",
  "cancelled",
  "abandoned",
] as const;
export type JobState = (typeof JOB_STATES)[number];

/** Step states (projections.Step*). */
export const STEP_STATES = ["pending", "running", "done", "failed", "uncertain"] as const;
export type StepState = (typeof STEP_STATES)[number];

/** Job kinds (events.Kind*). */
export const JOB_KINDS = ["reset", "teardown", "promote"] as const;
export type JobKind = (typeof JOB_KINDS)[number];

/** Step names (events.Step*), in the order the job kinds run them. */
export const STEP_NAMES = [
  "delete_db",
  "delete_env_vars",
  "delete_volumes",
  "force_push_template",
  "vacate",
  "delete_app",
  "delete_repo",
  "delete_project",
  "retire",
  "lookup_repo",
  "create_repo",
  "push_code",
  "record_repo",
] as const;

/** Resource kinds (events.Res*). */
export const RESOURCE_KINDS = [
  "database",
  "application",
  "env_var",
  "volume",
  "repository",
  "project",
] as const;

export interface Resource {
  kind: string;
  id: string;
  name?: string;
}

export interface RepoRef {
  project: string;
  slug: string;
}

export interface JobRef {
  id: string;
  kind: string;
  state: string;
  current_step?: string;
  steps_done: number;
  steps_total: number;
  /** When a queued job may start (the end of the grace period); absent once it runs. */
  not_before?: string;
}

export interface Recovery {
  job_id: string;
  state: string;
  completed_steps: string[] | null;
  uncertain_step?: string;
  remaining: Resource[] | null;
}

/** A delete the provider accepted (queued / 202) that is not confirmed yet. */
export interface PendingDelete {
  kind: string;
  id: string;
  accepted_at: string;
  job_id: string;
}

export interface SlotView {
  name: string;
  lifecycle: string;
  occupant?: string;
  /** occupant_id: the occupant's subject id, when the server records it (additive). */
  occupant_id?: string;
  occupied_at?: string;
  deadline?: string;
  project_uuid: string;
  app_uuid: string;
  db_uuid: string;
  repo: RepoRef;
  template_repo: RepoRef;
  template_ref: string;
  branch: string;
  active_job?: JobRef;
  latest_jobs: Record<string, JobRef> | null;
  resources: Resource[] | null;
  /** Resources whose delete the provider accepted and nobody confirmed yet. */
  deleting?: PendingDelete[];
  promoted_to?: RepoRef[];
  state_reason?: string;
  recovery?: Recovery;
  /** The slot stream's revision: it does not move on its jobs' events. */
  revision: number;
  updated_at: string;
  /**
   * The store position of the last event that changed this view (the slot's
   * own events and its jobs' events alike). It moves whenever any field
   * moves: the version clients compare.
   */
  position: number;
  /** Registered with a template: a reset brings the slot back to it (issue 23). */
  has_template?: boolean;
  /** What the newest ready reset deployed. */
  deployed?: Deployed;
  /** A vacant slot whose last reset brought it back to its template, running:healthy. */
  ready?: boolean;
  /** For a vacant slot that is not ready: what it lacks. */
  missing?: string[];
}

/** Deployed is the application a ready reset deployed. */
export interface Deployed {
  fqdn?: string;
  status: string;
  commit?: string;
  job_id: string;
  deployed_at: string;
}

export interface Attempt {
  number: number;
  worker: string;
  claimed_at: string;
  lease_until: string;
  ended_at?: string;
  outcome?: string;
}

export interface StepView {
  name: string;
  state: string;
  attempt?: number;
  started_at?: string;
  ended_at?: string;
  http_status?: number;
  error?: string;
  resource?: Resource;
  detail?: string;
  /** What the step left on the server (its API cannot delete it), with the manual clean-up. */
  left_on_server?: LeftVolume[];
}

export interface LeftVolume {
  storage_uuid: string;
  volume?: string;
  host_path?: string;
  server: string;
  cleanup: string;
}

export interface JobView {
  id: string;
  kind: string;
  slot: string;
  state: string;
  requested_by: string;
  params?: Record<string, string>;
  queued_at: string;
  not_before: string;
  ended_at?: string;
  attempts: Attempt[] | null;
  steps: StepView[] | null;
  uncertain_step?: string;
  reason?: string;
  remaining: Resource[] | null;
  resumable: boolean;
  cancellable: boolean;
  correlation_id?: string;
  revision: number;
  updated_at: string;
  /** The store position of the job's last event: the version clients compare. */
  position: number;
  queued_position?: number;
}

export interface AuditEntry {
  position: number;
  stream: string;
  type: string;
  slot?: string;
  job_id?: string;
  actor?: string;
  /** actor_id: the actor's subject id (user:…, token:…); actor is its display name. */
  actor_id?: string;
  /** actor_kind: user | token (people), system | worker (the server's own); absent for a name without an id. */
  actor_kind?: string;
  correlation_id?: string;
  time: string;
  summary: string;
  /** The summary's parts as data (projections.AuditArgs), for a summary in the reader's language. */
  args?: Record<string, string>;
  /** plumbing: a record of the machinery (checkpoints, demo sign-ins), not an audit row unless asked for. */
  plumbing?: boolean;
}

/** isPerson: the entry's actor is someone (an account, a token, a name), not the system or a job worker. */
export function isPerson(e: AuditEntry): boolean {
  if (e.actor_kind) return e.actor_kind === "user" || e.actor_kind === "token";
  return !!e.actor && !e.actor.startsWith("system:") && !e.actor.startsWith("worker:");
}

export interface RemainingResource {
  slot: string;
  lifecycle: string;
  resource: Resource;
  job_id?: string;
  /** Set while a delete of it was accepted and not confirmed. */
  delete_accepted_at?: string;
  /** For a Docker volume left on the server: the manual step that removes it. */
  cleanup?: string;
}

export interface Page {
  jobs: JobView[] | null;
  next_cursor?: string;
}

export interface Change {
  position: number;
  slot?: SlotView;
  job?: JobView;
  audit?: AuditEntry;
}

export interface Snapshot {
  position: number;
  server_time: string;
  slots: SlotView[] | null;
  /**
   * Set when the id the client resumed from is beyond the server's log (the
   * store was replaced): everything held belongs to another log.
   */
  log_reset?: boolean;
}

export interface Heartbeat {
  server_time: string;
  position: number;
  /** The server's heartbeat interval, if it says (not in the contract yet). */
  interval_ms?: number;
}

export interface JobAcceptedResult {
  job_id: string;
  kind: string;
  slot: string;
  not_before: string;
  steps: string[] | null;
}

export interface Plan {
  kind: string;
  slot: string;
  steps: string[] | null;
  resources: Resource[] | null;
  not_before: string;
  /** A promote's target as the git host answered the plan's lookup. */
  target?: TargetCheck;
}

export interface TargetCheck {
  repo: RepoRef;
  /** exists | free | unknown (could not check) */
  state: string;
  error?: string;
}

/** One raw event of a job, as GET /api/jobs/{id}/events returns it. */
export interface RecordedEvent {
  position: number;
  stream: string;
  revision: number;
  type: string;
  data: unknown;
  meta: EventMeta | null;
}

export interface EventMeta {
  actor?: string;
  correlation_id?: string;
  causation_id?: string;
  time?: string;
  schema?: number;
}

export interface ErrorBody {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

/** Terminal job states: nothing changes them except a resume. */
export const TERMINAL_STATES: ReadonlySet<string> = new Set([
  "succeeded",
  "failed",
  "timed_out",
  "cancelled",
  "abandoned",
]);

/** Job states that ended without success. */
export const UNSUCCESSFUL_STATES: ReadonlySet<string> = new Set([
  "failed",
  "timed_out",
  "cancelled",
  "abandoned",
]);
