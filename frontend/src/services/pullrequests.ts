// The pull-request flow (issue 34, docs/pull-requests.md): the pull request
// holding a slot (SlotView.pull_request), every pull request of the read
// model (/api/pull-requests, then live: Change.pull_request), the
// repositories linked to the
// pool (/api/pr-repos), Bitbucket's deliveries as received
// (/api/hooks/bitbucket/deliveries), and the Simulator page's pull requests
// (the simulated Bitbucket's /api/sim/pull-requests, whose answer the
// server signs and receives: /api/hooks/bitbucket/simulated).
import * as v from "valibot";
import { enc, nothing, request } from "./http";
import { RepoRef } from "./resources";
import { decoder, int, list, listOf, optStr, str, strMap } from "./wire";

/** SlotPR is the pull request holding a slot (projections.SlotPR). */
export const SlotPR = v.object({
  repo: RepoRef,
  id: int,
  title: optStr,
  author: optStr,
  branch: str,
  /** The PR's page in Bitbucket. */
  link: optStr,
  /** The head of its newest pr_deploy job (what Deployed.commit becomes once it ran). */
  head: str,
  job_id: optStr,
});
export type SlotPR = v.InferOutput<typeof SlotPR>;

/**
 * PRView is one pull request of the read model (projections.PRView): the
 * list /api/pull-requests answers and the stream's changes carry.
 */
export const PRView = v.object({
  stream: str,
  repo: RepoRef,
  id: int,
  title: optStr,
  author: optStr,
  branch: str,
  link: optStr,
  head: str,
  state: str,
  /** The slot it took (still named after it closed). */
  slot: optStr,
  released: v.optional(v.boolean()),
  job_id: optStr,
  /** Since when it waits for a slot; absent once it took one or closed. */
  waiting_since: optStr,
  /** The order the waiting PRs are served in (the PRWaiting's position). */
  waiting_position: v.optional(int),
  phase: optStr,
  opened_at: str,
  updated_at: str,
  position: int,
});
export type PRView = v.InferOutput<typeof PRView>;

/** PRList is GET /api/pull-requests' answer. */
export const PRList = v.object({ pull_requests: list(PRView), position: int });
export type PRList = v.InferOutput<typeof PRList>;

/** waitingPRs are the open PRs waiting for a slot, in the order they will be served. */
export function waitingPRs(prs: Iterable<PRView>): PRView[] {
  return [...prs]
    .filter((p) => p.state === "OPEN" && (p.waiting_position ?? 0) > 0)
    .sort((a, b) => (a.waiting_position ?? 0) - (b.waiting_position ?? 0));
}

/** DELIVERY_RESULTS: what the flow made of a delivery (pullrequests.Outcome.Result). */
export const DELIVERY_RESULTS = ["accepted", "duplicate", "ignored", "refused"] as const;

/** Delivery is one delivery as received (pullrequests.DeliveryRecord). */
export const Delivery = v.object({
  time: str,
  request_id: optStr,
  event_key: optStr,
  repo: optStr,
  pr: v.optional(int),
  result: str,
  /** The server's English reason, shown only when it sends no code. */
  reason: optStr,
  reason_code: optStr,
  reason_args: v.optional(strMap),
});
export type Delivery = v.InferOutput<typeof Delivery>;

/** Outcome is the answer to one delivery (pullrequests.Outcome). */
export const Outcome = v.object({ result: str, reason: optStr, reason_code: optStr, reason_args: v.optional(strMap) });
export type Outcome = v.InferOutput<typeof Outcome>;

/** SimDelivery is the simulated Bitbucket's answer: the delivery it would send (sim.Delivery). */
export const SimDelivery = v.object({ id: int, head: str, event_key: str, request_id: str, payload: v.unknown() });
export type SimDelivery = v.InferOutput<typeof SimDelivery>;

const repos = listOf(RepoRef, "repos", "linked repositories");
const prList = decoder(PRList, "pull request list");
const deliveries = listOf(Delivery, "deliveries", "delivery list");
const linked = decoder(v.object({ repo: RepoRef }), "linked repository");
const simDelivery = decoder(SimDelivery, "simulated delivery");
const outcome = decoder(Outcome, "delivery outcome");

/** repoName is "PROJECT/slug". */
export const repoName = (r: RepoRef) => `${r.project}/${r.slug}`;

/** deliver has the server sign and receive what the simulated Bitbucket answered. */
const deliver = (d: SimDelivery) => request("/api/hooks/bitbucket/simulated", outcome, { method: "POST", body: d });

export const prService = {
  list: (signal?: AbortSignal) => request("/api/pull-requests", prList, { signal }),
  repos: (signal?: AbortSignal) => request("/api/pr-repos", repos, { signal }),
  link: (repo: string) => request("/api/pr-repos", linked, { method: "POST", body: { repo } }),
  unlink: (r: RepoRef) => request(`/api/pr-repos/${enc(r.project)}/${enc(r.slug)}`, nothing, { method: "DELETE" }),
  deliveries: (signal?: AbortSignal) => request("/api/hooks/bitbucket/deliveries", deliveries, { signal }),
  /** open: a new pull request in the simulated Bitbucket, its pr:opened delivered; from a fork in project `fork` (`~user`, or a key) when given. */
  open: async (project: string, repo: string, branch: string, fork = "") => {
    const body = fork ? { project, repo, branch, fork } : { project, repo, branch };
    const d = await request("/api/sim/pull-requests", simDelivery, { method: "POST", body });
    return { delivery: d, outcome: await deliver(d) };
  },
  /** close: merge or decline a simulated pull request, its delivery delivered. */
  close: async (r: RepoRef, id: number, how: "merge" | "decline") => {
    const d = await request(`/api/sim/pull-requests/${enc(r.project)}/${enc(r.slug)}/${id}/${how}`, simDelivery, { method: "POST", body: {} });
    return { delivery: d, outcome: await deliver(d) };
  },
  /** push: a new commit on a simulated pull request's branch (pr:from_ref_updated), delivered. */
  push: async (r: RepoRef, id: number) => {
    const d = await request(`/api/sim/pull-requests/${enc(r.project)}/${enc(r.slug)}/${id}/push`, simDelivery, { method: "POST", body: {} });
    return { delivery: d, outcome: await deliver(d) };
  },
};
