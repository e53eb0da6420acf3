// useWaitlist keeps the waitlist page live without a poller: the stream's
// audit feed carries every event, and the newest one that can change the
// queue, an offer or an estimate is the key of the REST load, which asks
// for a read model at least that new (?after=).
import { useLive } from "../live/store";
import { useLoad, type Load } from "../live/useLoad";
import { WAITLIST_TYPES, waitlistService, type WaitlistAnswer } from "../services/waitlist";

/** lastWaitlistPosition is the position of the newest relevant audit entry. */
export function useLastWaitlistPosition(): number {
  return useLive((s) => {
    for (let i = s.audit.length - 1; i >= 0; i--) if (WAITLIST_TYPES.has(s.audit[i].type)) return s.audit[i].position;
    return 0;
  });
}

/** useWaitlist loads the queue; source is the health id (one per caller). */
export function useWaitlist(source = "waitlist"): Load<WaitlistAnswer> {
  const after = useLastWaitlistPosition();
  const epoch = useLive((s) => s.epoch);
  return useLoad(source, `${after}:${epoch}`, (signal) => waitlistService.list(after, signal));
}
