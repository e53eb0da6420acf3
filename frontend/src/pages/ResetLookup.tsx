import { useEffect } from "react";
import { Link, useLocation } from "wouter";
import { jobsService } from "../services/jobs";
import { apiErrorText } from "../format";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";

/**
 * ResetLookup finds a slot's newest reset job directly (slot + kind, never by
 * scanning a window of recent jobs, seed row 6) and opens its wait view. If
 * it cannot be found, it says so and stays.
 */
export function ResetLookup({ slot }: { slot: string }) {
  const t = useT();
  const [, navigate] = useLocation();
  const load = useLoad(`latest-reset:${slot}`, slot, (signal) => jobsService.latest(slot, "reset", signal));
  const id = load.data?.id;
  useEffect(() => {
    if (id) navigate(`/jobs/${encodeURIComponent(id)}/wait`, { replace: true });
  }, [id, navigate]);
  if (load.loading || id) return <p>{t("wait.checking")}</p>;
  if (load.error?.notFound) {
    // The server answered: there is no such job (or slot). Say so (issue 14).
    return (
      <div role="alert" data-testid="no-reset">
        <p>{t("wait.no_reset", { slot })}</p>
        <Link href={`/slots/${encodeURIComponent(slot)}`}>{slot}</Link>
      </div>
    );
  }
  return (
    <div className="unknown" data-testid="cannot-verify" role="alert">
      <strong>{t("wait.unknown")}</strong>
      <p>{t("wait.unknown_detail")}</p>
      {load.error && <p className="muted">{apiErrorText(load.error, t)}</p>}
      <button type="button" onClick={load.reload}>
        {t("common.retry")}
      </button>
    </div>
  );
}
