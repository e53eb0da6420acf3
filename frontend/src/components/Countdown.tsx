import { formatDuration } from "../format";
import { useT } from "../i18n";
import { useNow } from "../live/ticker";

/**
 * Countdown renders the time left until an instant, from the server clock.
 * It owns no timer: the global ticker re-renders it once a second.
 */
export function Countdown({ until, overdueLabel = true }: { until: string; overdueLabel?: boolean }) {
  const t = useT();
  const now = useNow();
  const target = Date.parse(until);
  if (Number.isNaN(target)) return <span>{t("common.unknown")}</span>;
  const left = target - now;
  const text =
    left >= 0
      ? t("slot.left", { time: formatDuration(left, t) })
      : overdueLabel
        ? t("slot.overdue", { time: formatDuration(-left, t) })
        : formatDuration(0, t);
  return (
    <time dateTime={until} className={left < 0 ? "countdown overdue" : "countdown"} data-countdown="">
      {text}
    </time>
  );
}
