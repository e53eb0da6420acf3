import { useLayoutEffect, useMemo, useRef, useState } from "react";
import { SlotCard } from "../components/SlotCard";
import { useT } from "../i18n";
import { useReady, useSlots } from "../live/store";

/** The performance marks the e2e test reads (first board render after the snapshot). */
export const MARK_SNAPSHOT = "sk:snapshot";
export const MARK_BOARD = "sk:board-rendered";
export const MEASURE_BOARD = "sk:board-first-render";

/** Board shows one card per slot, live from the store. */
export function Board() {
  const t = useT();
  const slots = useSlots();
  const ready = useReady();
  const [filter, setFilter] = useState("");
  const list = useMemo(() => {
    const f = filter.trim().toLowerCase();
    return [...slots.values()]
      .filter((s) => !f || s.name.toLowerCase().includes(f) || (s.occupant ?? "").toLowerCase().includes(f))
      .sort((a, b) => a.name.localeCompare(b.name));
  }, [slots, filter]);

  const measured = useRef(false);
  useLayoutEffect(() => {
    if (measured.current || list.length === 0 || typeof performance === "undefined") return;
    measured.current = true;
    performance.mark(MARK_BOARD);
    if (performance.getEntriesByName(MARK_SNAPSHOT).length > 0) {
      performance.measure(MEASURE_BOARD, MARK_SNAPSHOT, MARK_BOARD);
    }
  }, [list.length]);

  return (
    <section aria-labelledby="board-title">
      <div className="page-head">
        <h1 id="board-title">{t("board.title")}</h1>
        <span className="muted">{t("board.count", { count: slots.size })}</span>
        <input
          type="search"
          aria-label={t("board.filter")}
          placeholder={t("board.filter")}
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
        />
      </div>
      {!ready && slots.size === 0 && <p>{t("board.waiting")}</p>}
      {ready && slots.size === 0 && <p>{t("board.empty")}</p>}
      <ul className="board" data-testid="board">
        {list.map((s) => (
          <SlotCard key={s.name} slot={s} />
        ))}
      </ul>
    </section>
  );
}
