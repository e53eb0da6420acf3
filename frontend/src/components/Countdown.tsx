import { formatDuration } from "../format";
import { useT } from "../i18n";
import { useNow } from "../live/ticker";

/**
 * Countdown renders the time left until an instant, from the server clock.
 * It owns no timer: the global ticker re-renders it once a second. With
 * starts, it counts down to a queued job's start ("starts in 23 s", then
 * "starting…" once the time has come and no worker has claimed it yet).
 */
export function Countdown({ until, overdueLabel = true, starts = false }: { until: string; overdueLabel?: boolean; starts?: boolean }) {
  const t = useT();
  const now = useNow();
  const target = Date.parse(until);
  if (Number.isNaN(target)) return <span>{t("common.unknown")}</span>;
  const left = target - now;
  const text = starts
    ? left > 0
      ? t("job.starts_in", { time: formatDuration(left, t) })
      : t("job.starting")
    : left >= 0
      ? t("slot.left", { time: formatDuration(left, t) })
      : overdueLabel
        ? t("slot.overdue", { time: formatDuration(-left, t) })
        : formatDuration(0, t);
  return (
    <time dateTime={until} className={left < 0 && !starts ? "countdown overdue" : "countdown"} data-countdown="">
      {text}
    </time>
  );
}
