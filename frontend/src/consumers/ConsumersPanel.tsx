import { FailureRaw } from "../components/FailureRaw";
import { TableWrap } from "../components/TableWrap";
import { formatTime } from "../format";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";
import { adminService } from "../services/admin";

/**
 * ConsumersPanel shows, on the admin page, the events this server's log
 * consumers parked and the consumers that stopped (issue 25 item 4): a bad
 * event must be visible, not only a line in the server's log.
 */
export function ConsumersPanel() {
  const t = useT();
  const load = useLoad("admin:consumers", "", (signal) => adminService.consumers(signal));
  const r = load.data;
  const stopped = Object.entries(r?.stopped ?? {});
  return (
    <section aria-labelledby="consumers-title" data-testid="consumers-panel">
      <h2 id="consumers-title">{t("consumers.title")}</h2>
      <p className="muted small">{t("consumers.intro")}</p>
      {r && r.parked_total === 0 && stopped.length === 0 && <p data-testid="consumers-none">{t("consumers.none")}</p>}
      {stopped.map(([name, reason]) => (
        // The reason is the server's own English (a Go error): folded under the reader's words.
        <div key={name} className="error" data-testid="consumer-stopped">
          {t("consumers.stopped", { name })}
          <FailureRaw failure={{ raw: reason }} />
        </div>
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
                    <td data-label={t("consumers.col.error")}>
                      <div>
                        {t("consumers.not_applied")}
                        <FailureRaw failure={{ raw: p.error }} />
                      </div>
                    </td>
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
