// usePullRequests keeps the live store's pull requests: one REST load
// (GET /api/pull-requests) when a page first needs them and again after
// every snapshot (the stream could not resume, so changes may have been
// missed: the epoch moves), and in between the stream's changes, which
// carry each pull request's view (Change.pull_request). No poller.
import { useEffect } from "react";
import { putPRs, useLive, usePRs } from "../live/store";
import { useLoad } from "../live/useLoad";
import type { PRView } from "../services/pullrequests";
import { prService } from "../services/pullrequests";

export function usePullRequests(source = "pull-requests"): ReadonlyMap<string, PRView> {
  const epoch = useLive((s) => s.epoch);
  const load = useLoad(source, String(epoch), (signal) => prService.list(signal));
  useEffect(() => {
    if (load.data) putPRs(load.data.pull_requests ?? []);
  }, [load.data]);
  return usePRs();
}
