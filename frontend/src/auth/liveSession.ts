// The live stream follows the session: it needs a signed-in subject (the
// server refuses /api/stream without one), so it is opened on sign-in,
// closed on sign-out or expiry, and opened again on the next sign-in —
// resuming from the store's position, so nothing is missed or repeated.
import { checkSession, getAuth, subscribeAuth } from "./session";

export type StartStream = (onRefused: () => void) => () => void;

/** followSession starts and stops the stream with the session; it returns an unsubscribe. */
export function followSession(start: StartStream): () => void {
  let stop: (() => void) | undefined;
  let subject = "";
  const sync = (): void => {
    const s = getAuth();
    const who = s.status === "signed_in" ? s.subject.id : "";
    if (stop && who !== subject) {
      stop();
      stop = undefined;
    }
    subject = who;
    if (who && !stop) stop = start(() => void checkSession());
  };
  const unsubscribe = subscribeAuth(sync);
  sync();
  return () => {
    unsubscribe();
    stop?.();
    stop = undefined;
  };
}
