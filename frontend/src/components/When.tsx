import { formatRelative, formatTime } from "../format";
import { useT } from "../i18n";
import { useNowFor } from "../live/ticker";

/**
 * When shows an instant as people read a run page: how long ago ("3 min
 * ago", "12초 전"), kept current by the one global ticker, with the local
 * date and time to the second on hover (title) and in dateTime.
 */
export function When({ iso }: { iso: string | undefined }) {
  const t = useT();
  const at = iso ? Date.parse(iso) : Number.NaN;
  const now = useNowFor(Number.isNaN(at) ? 0 : at);
  if (!iso) return null;
  if (Number.isNaN(at)) return <time>{iso}</time>;
  return (
    <time dateTime={iso} title={formatTime(iso, t.lang, { seconds: true })} data-relative="">
      {formatRelative(iso, now, t.lang)}
    </time>
  );
}
