import { useEffect, useState } from "react";
import { useT } from "../i18n";
import { getLiveState } from "../live/store";
import { onTick } from "../live/ticker";
import { replayService, type Freshness } from "../services/replay";
import "./replay.css";

/** How often the badge asks the server (GET /api/freshness is one log read). */
export const FRESHNESS_POLL_MS = 5_000;

/**
 * IN_FLIGHT_S: missing events younger than this are on their way down the
 * live stream (one event arrives within milliseconds), not a page behind.
 */
export const IN_FLIGHT_S = 2;

export type FreshState = { kind: "live" } | { kind: "behind"; events: number; seconds: number } | { kind: "rebuilding"; position: number; head: number } | { kind: "unknown" };

/** freshState reads a /api/freshness answer for the page's position. */
export function freshState(f: Freshness | undefined): FreshState {
  if (!f) return { kind: "unknown" };
  if (f.rebuilding) return { kind: "rebuilding", position: f.read_model, head: f.head };
  if (f.behind_events === 0 || f.behind_seconds < IN_FLIGHT_S) return { kind: "live" };
  return { kind: "behind", events: f.behind_events, seconds: Math.round(f.behind_seconds) };
}

/**
 * FreshnessBadge (issue 28, item 4) says on every page whether what it shows
 * is live or how far behind the log it is: the live store's position (what
 * the page shows) against the store's head, in events and in the age of
 * the oldest event the page has not seen; a read model still rebuilding
 * says so.
 */
export function FreshnessBadge() {
  const t = useT();
  const [f, setF] = useState<Freshness | undefined>(undefined);
  useEffect(() => {
    const ctl = new AbortController();
    let last = 0;
    const ask = () => {
      last = Date.now();
      // The page's position is read at each ask, not followed: a busy
      // pool moves it many times a second, and a move must not cost a request.
      const live = getLiveState();
      replayService.freshness(live.ready ? live.position : undefined, ctl.signal).then(setF, () => setF(undefined));
    };
    ask();
    // On the one global ticker (seed row 8: no component owns a timer).
    const off = onTick((localNow) => {
      if (localNow - last >= FRESHNESS_POLL_MS) ask();
    });
    return () => {
      off();
      ctl.abort();
    };
  }, []);
  const st = freshState(f);
  const text =
    st.kind === "live"
      ? t("fresh.live")
      : st.kind === "behind"
        ? t("fresh.behind", { events: st.events, seconds: st.seconds })
        : st.kind === "rebuilding"
          ? t("fresh.rebuilding", { position: st.position, head: st.head })
          : t("fresh.unknown");
  return (
    <span className={`badge fresh fresh-${st.kind}`} title={t("fresh.title")} data-testid="freshness" data-state={st.kind} role="status">
      {text}
    </span>
  );
}
