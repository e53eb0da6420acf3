import { formatRelative, formatTime } from "../format";
import { useT } from "../i18n";
import { useTicking } from "../live/ticker";

/**
 * When shows an instant as people read a run page: how long ago ("3 min
 * ago", "12초 전"), kept current by the one global ticker, with the local
 * date and time to the second on hover (title) and in dateTime.
 */
export function When({ iso }: { iso: string | undefined }) {
  const t = useT();
  const text = useTicking((now) => formatRelative(iso, now, t.lang));
  if (!iso) return null;
  if (Number.isNaN(Date.parse(iso))) return <time>{iso}</time>;
  return (
    <time dateTime={iso} title={formatTime(iso, t.lang, { seconds: true })} data-relative="">
      {text}
    </time>
  );
}
