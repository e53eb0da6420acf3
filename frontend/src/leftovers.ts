// One story about what is left on the server (issue 35 item 3). What a
// provider's API cannot delete (a Docker volume and its data, a bind
// mount's directory, what a delete left on a server Coolify could not
// reach) is something a person must clean: it stays among the slot's
// resources, and every page says so the same way — the board card counts
// it in "needs attention", the slot, the job and the Remaining page give
// the command — and none says "none" or "every step is confirmed" beside it.
// The rules are projections.RemainingOf's (backend), so the slot and job
// pages, which read resources and not the Remaining answer, agree with it.
import type { LeftVolume, JobView } from "./services/jobs";
import type { Resource } from "./services/resources";
import type { SlotView } from "./services/slots";

/** The codes of a manual clean-up (projections.Cleanup*). */
export type CleanupCode = "docker_volume_rm" | "bind_mount_rm" | "unreachable_rm";

export interface Cleanup {
  code: CleanupCode;
  /** The shell command to run on that server, when there is one to copy. */
  command?: string;
}

/** cleanupOf says how a person removes a resource left on a server; undefined for one Slotkeeper deletes itself. */
export function cleanupOf(r: Resource & { cleanup?: string }): Cleanup | undefined {
  if (r.kind !== "docker_volume" && r.kind !== "docker_container") return undefined;
  if (r.cleanup) return { code: "unreachable_rm", command: r.cleanup };
  if (r.kind !== "docker_volume") return undefined;
  if (r.id.startsWith("/")) return { code: "bind_mount_rm" };
  return { code: "docker_volume_rm", command: `docker volume rm ${r.id}` };
}

/** toClean lists a slot's resources a person must clean on the server. */
export function toClean(slot: Pick<SlotView, "resources"> | undefined): Resource[] {
  return (slot?.resources ?? []).filter((r) => cleanupOf(r) !== undefined);
}

/** leftResource is a job step's left volume as the slot tracks it (events.LeftVolume.Resource). */
export function leftResource(l: LeftVolume, app: string | undefined): Resource {
  const id = l.volume || l.host_path || l.storage_uuid;
  // Named as the slot names it (events.LeftVolume.Resource): the server, in the reader's language.
  return app ? { kind: "docker_volume", id, name: l.server, name_code: "app_server", name_args: { app } } : { kind: "docker_volume", id };
}

/**
 * jobLeftovers lists what a job's steps left on the server and is still to
 * clean: still among the slot's resources (a slot view not loaded yet keeps
 * them all: nothing says they were cleaned).
 */
export function jobLeftovers(job: Pick<JobView, "steps">, slot: SlotView | undefined): Resource[] {
  const held = slot ? new Set(toClean(slot).map((r) => r.id)) : undefined;
  const out: Resource[] = [];
  const seen = new Set<string>();
  for (const s of job.steps ?? []) {
    for (const l of s.left_on_server ?? []) {
      const r = leftResource(l, slot?.app_uuid);
      if (seen.has(r.id) || (held && !held.has(r.id))) continue;
      seen.add(r.id);
      out.push(r);
    }
  }
  return out;
}
