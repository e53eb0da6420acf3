import { useT, type Key } from "../i18n";
import { useHealth, type FailureReason } from "../live/health";

const detail: Record<FailureReason, Key> = {
  stale: "banner.stale",
  disconnected: "banner.disconnected",
  request_failed: "banner.request_failed",
};

/**
 * ConnectionBanner is the one connection warning of the app. It shows while
 * any source is failing and lists each distinct reason; it disappears only
 * when every source has recovered (see live/health.ts).
 */
export function ConnectionBanner() {
  const t = useT();
  const { failing } = useHealth();
  const reasons = [...new Set(failing.values())];
  return (
    <div role="status" aria-live="assertive" className="banner-slot">
      {reasons.length > 0 && (
        <div className="banner" data-testid="connection-banner">
          <strong>{t("banner.title")}</strong>
          {reasons.map((r) => (
            <span key={r}> {t(detail[r])}</span>
          ))}
        </div>
      )}
    </div>
  );
}
