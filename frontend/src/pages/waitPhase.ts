// The decision of the release (reset) wait view, kept pure so every state is
// tested. Rules (seed row 6, DESIGN.md invariant 7):
//   - success only when the job's own state is "succeeded" (JobSucceeded);
//   - an unsuccessful terminal state is a failure naming done and remaining;
//   - a 404 says "not found" (the server answered; issue 14);
//   - anything not proven — server unreachable, stream not
//     live while the job is still moving, a state this page does not know —
//     is "cannot verify progress", never success, never a redirect.
import type { ApiError } from "../services/http";
import { UNSUCCESSFUL_STATES, type JobView } from "../services/jobs";
import { completedSteps } from "../components/Steps";
import { untouched } from "../format";

export type WaitPhase =
  | { kind: "checking" }
  | { kind: "unknown"; why: "unreachable" | "stale" | "unexpected_state" }
  | { kind: "not_found" }
  | { kind: "grace"; notBefore: string }
  | { kind: "queued" }
  | { kind: "running" }
  | { kind: "succeeded" }
  | { kind: "cancelled" }
  | { kind: "failed"; state: string };

export function waitPhase(
  job: JobView | undefined,
  load: { loading: boolean; error: ApiError | undefined },
  streamLive: boolean,
  now: number,
): WaitPhase {
  if (job) {
    if (job.state === "succeeded") return { kind: "succeeded" };
    if (untouched(job.state, completedSteps(job.steps), job.uncertain_step)) return { kind: "cancelled" };
    if (UNSUCCESSFUL_STATES.has(job.state)) return { kind: "failed", state: job.state };
    if (!streamLive) return { kind: "unknown", why: "stale" };
    if (job.state === "queued") {
      const nb = Date.parse(job.not_before);
      return !Number.isNaN(nb) && nb > now ? { kind: "grace", notBefore: job.not_before } : { kind: "queued" };
    }
    if (job.state === "running") return { kind: "running" };
    return { kind: "unknown", why: "unexpected_state" };
  }
  // A 404 is an answer: the server has no such job. Say so (issue 14); it is
  // still no success, and the job showing up on the stream later replaces it.
  if (load.error) return load.error.notFound ? { kind: "not_found" } : { kind: "unknown", why: "unreachable" };
  if (load.loading) return { kind: "checking" };
  return { kind: "unknown", why: "unreachable" };
}
