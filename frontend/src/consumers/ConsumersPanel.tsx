import { request } from "../api/client";
import { TableWrap } from "../components/TableWrap";
import { formatTime } from "../format";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";

/** ParkedEvent is one event a consumer skipped (GET /api/admin/consumers, backend/consumer.Parked). */
export interface ParkedEvent {
  consumer: string;
  position: number;
  stream: string;
  revision: number;
  type: string;
  event_id: string;
  error: string;
  at: string;
}

/** ConsumersReport is the answer of GET /api/admin/consumers. */
export interface ConsumersReport {
  parked: ParkedEvent[];
  parked_total: number;
  stopped: Record<string, string>;
}

/** fromAPI checks the wire answer where it arrives instead of trusting a cast. */
export function consumersFromAPI(v: unknown): ConsumersReport {
  const o = (v ?? {}) as Partial<ConsumersReport>;
  return {
    parked: Array.isArray(o.parked) ? o.parked : [],
    parked_total: typeof o.parked_total === "number" ? o.parked_total : 0,
    stopped: o.stopped && typeof o.stopped === "object" ? o.stopped : {},
  };
}

export const fetchConsumers = async (signal?: AbortSignal): Promise<ConsumersReport> =>
  consumersFromAPI(await request<unknown>("/api/admin/consumers", { signal }));

/**
 * ConsumersPanel shows, on the admin page, the events this server's log
 * consumers parked and the consumers that stopped (issue 25 item 4): a bad
 * event must be visible, not only a line in the server's log.
 */
export function ConsumersPanel() {
  const t = useT();
  const load = useLoad("admin:consumers", "", (signal) => fetchConsumers(signal));
  const r = load.data;
  const stopped = Object.entries(r?.stopped ?? {});
  return (
    <section aria-labelledby="consumers-title" data-testid="consumers-panel">
      <h2 id="consumers-title">{t("consumers.title")}</h2>
      <p className="muted small">{t("consumers.intro")}</p>
      {r && r.parked_total === 0 && stopped.length === 0 && <p data-testid="consumers-none">{t("consumers.none")}</p>}
      {stopped.map(([name, reason]) => (
        <p key={name} className="error" data-testid="consumer-stopped">
          {t("consumers.stopped", { name, reason })}
        </p>
      ))}
      {r && r.parked_total > 0 && (
        <>
          <p data-testid="consumers-total">{t("consumers.parked_total", { count: String(r.parked_total) })}</p>
          <TableWrap label={t("consumers.title")}>
            <table className="stack-on-phone">
              <thead>
                <tr>
                  <th>{t("consumers.col.consumer")}</th>
                  <th>{t("consumers.col.event")}</th>
                  <th>{t("consumers.col.error")}</th>
                  <th>{t("consumers.col.at")}</th>
                </tr>
              </thead>
              <tbody>
                {r.parked.map((p) => (
                  <tr key={`${p.consumer}:${p.position}`} data-testid="parked-event">
                    <td data-label={t("consumers.col.consumer")}>{p.consumer}</td>
                    <td data-label={t("consumers.col.event")}>
                      <code>{p.type}</code> · {p.stream}@{p.revision} · #{p.position}
                    </td>
                    <td data-label={t("consumers.col.error")}>{p.error}</td>
                    <td data-label={t("consumers.col.at")}>{formatTime(p.at, t.lang)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        </>
      )}
    </section>
  );
}
