// Resources: what a slot holds at its providers (events.Resource), and
// GET /api/resources/remaining, everything left behind by a job.
import * as v from "valibot";
import { request } from "./http";
import { decoder, list, optStr, str } from "./wire";

/** Resource kinds (events.Res*). */
export const RESOURCE_KINDS = [
  "database",
  "application",
  "env_var",
  "volume",
  "repository",
  "project",
] as const;

export const Resource = v.object({
  kind: str,
  id: str,
  name: optStr,
  /** A name the server wrote as a description, as a code (events.Name*) and its parts; format.resourceName words it. */
  name_code: optStr,
  name_args: v.optional(v.object({ branch: optStr, template: optStr, app: optStr, deployment: optStr, target: optStr })),
  /** For what a delete left on a server Coolify could not reach (issue 32): the command that removes it there. */
  cleanup: optStr,
});
export type Resource = v.InferOutput<typeof Resource>;

export const RepoRef = v.object({ project: str, slug: str });
export type RepoRef = v.InferOutput<typeof RepoRef>;

export const RemainingResource = v.object({
  slot: str,
  lifecycle: str,
  resource: Resource,
  job_id: optStr,
  /** Set while a delete of it was accepted and not confirmed. */
  delete_accepted_at: optStr,
  /** For a Docker volume left on the server: the manual step that removes it. */
  cleanup: optStr,
  /** cleanup as a code (projections.Cleanup*) and the shell command alone (issue 35). */
  cleanup_code: optStr,
  cleanup_command: optStr,
});
export type RemainingResource = v.InferOutput<typeof RemainingResource>;

const Remaining = decoder(v.object({ resources: list(RemainingResource) }), "remaining resources");

export const resourcesService = {
  remaining: (signal?: AbortSignal) => request("/api/resources/remaining", Remaining, { signal }),
};
