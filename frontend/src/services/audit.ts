// The audit log (GET /api/audit): one entry per event, its summary in
// English and its parts as data (args) for a summary in the reader's language.
import * as v from "valibot";
import { query, request } from "./http";
import { decoder, int, list, optStr, str, strMap } from "./wire";

export const AuditEntry = v.object({
  position: int,
  stream: str,
  type: str,
  slot: optStr,
  job_id: optStr,
  actor: optStr,
  /** actor_id: the actor's subject id (user:…, token:…); actor is its display name. */
  actor_id: optStr,
  /** actor_kind: user | token (people), system | worker (the server's own); absent for a name without an id. */
  actor_kind: optStr,
  correlation_id: optStr,
  time: str,
  summary: str,
  /** The summary's parts as data (projections.AuditArgs), for a summary in the reader's language. */
  args: v.optional(strMap),
  /** plumbing: a record of the machinery (checkpoints, demo sign-ins), not an audit row unless asked for. */
  plumbing: v.optional(v.boolean()),
});
export type AuditEntry = v.InferOutput<typeof AuditEntry>;

/** isPerson: the entry's actor is someone (an account, a token, a name), not the system or a job worker. */
export function isPerson(e: AuditEntry): boolean {
  if (e.actor_kind) return e.actor_kind === "user" || e.actor_kind === "token";
  return !!e.actor && !e.actor.startsWith("system:") && !e.actor.startsWith("worker:");
}

export interface AuditFilter {
  slot?: string;
  job?: string;
  actor?: string;
  kind?: string;
  since?: string;
  after?: number;
  /** before and order "newest": newest first, paged backwards. */
  before?: number;
  order?: "newest" | "oldest";
  limit?: number;
}

const entries = decoder(v.object({ entries: list(AuditEntry) }), "audit entries");

export const auditService = {
  list: (f: AuditFilter, signal?: AbortSignal) => request(`/api/audit${query({ ...f })}`, entries, { signal }),
};
