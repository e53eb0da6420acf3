import { Link } from "wouter";
import { api } from "../api/client";
import { CommandError } from "../components/CommandError";
import { formatTime } from "../format";
import { useT } from "../i18n";
import { useLive } from "../live/store";
import { useLoad } from "../live/useLoad";

/**
 * remainingKey changes whenever a slot that can own leftovers changes, so
 * the page reloads on pushed changes (never on a timer).
 */
function useRemainingKey(): string {
  return useLive((s) => {
    let k = "";
    for (const v of s.slots.values()) {
      if (v.recovery || v.lifecycle === "teardown_incomplete" || v.lifecycle === "retired") k += `${v.name}@${v.position};`;
    }
    return k;
  });
}

/** RemainingPage lists every outside resource some slot still owns after a failure or teardown. */
export function RemainingPage() {
  const t = useT();
  const key = useRemainingKey();
  const load = useLoad("remaining", key, (signal) => api.remaining(signal));
  const rows = load.data?.resources ?? [];
  return (
    <section aria-labelledby="remaining-title">
      <h1 id="remaining-title">{t("remaining.title")}</h1>
      {load.error && <CommandError error={load.error} />}
      {load.loading && !load.data && <p>{t("common.loading")}</p>}
      {load.data && rows.length === 0 && <p>{t("remaining.empty")}</p>}
      {rows.length > 0 && (
        <div className="table-wrap">
          <table data-testid="remaining-table">
            <thead>
              <tr>
                <th>{t("remaining.slot")}</th>
                <th>{t("remaining.kind")}</th>
                <th>{t("remaining.id")}</th>
                <th>{t("remaining.job")}</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={`${r.slot}:${r.resource.kind}:${r.resource.id}`}>
                  <td>
                    <Link href={`/slots/${encodeURIComponent(r.slot)}`}>{r.slot}</Link> ({t.dyn("lifecycle", r.lifecycle)})
                  </td>
                  <td>{t.dyn("res", r.resource.kind)}</td>
                  <td>
                    <code>{r.resource.id}</code> {r.resource.name ?? ""}
                    {r.delete_accepted_at && (
                      <>
                        {" "}
                        <span className="badge warn" data-testid="deleting">
                          {t("slot.deleting", { time: formatTime(r.delete_accepted_at, t.lang) })}
                        </span>
                      </>
                    )}
                  </td>
                  <td>{r.job_id ? <Link href={`/jobs/${encodeURIComponent(r.job_id)}`}>{t("common.view_timeline")}</Link> : ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
