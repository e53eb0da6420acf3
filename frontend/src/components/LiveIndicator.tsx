import { useT, type Key } from "../i18n";
import { useStreamStatus, type StreamStatus } from "../live/stream";

const label: Record<StreamStatus, Key> = {
  live: "live.live",
  connecting: "live.connecting",
  reconnecting: "live.reconnecting",
  stale: "live.stale",
  stopped: "live.stopped",
};

/** LiveIndicator is the always-visible live/stale light in the header. */
export function LiveIndicator() {
  const t = useT();
  const status = useStreamStatus();
  return (
    <span className={`live-indicator live-${status}`} title={t("live.title")} data-testid="live-indicator" data-status={status}>
      <span className="dot" aria-hidden="true" />
      {t(label[status])}
    </span>
  );
}
