import { Link } from "wouter";
import type { Resource } from "../api/types";
import { resourceLabel, stepList, untouched } from "../format";
import { useT } from "../i18n";

export interface RecoveryInfo {
  jobId: string;
  kind: string;
  state: string;
  completed: readonly string[] | null;
  uncertain?: string;
  remaining: readonly Resource[] | null;
}

/**
 * RecoveryNotice is every failure/recovery message of the app: it names the
 * completed steps, the uncertain step and what remains, and links to the
 * job's timeline.
 */
export function RecoveryNotice({ info, linkTimeline = true }: { info: RecoveryInfo; linkTimeline?: boolean }) {
  const t = useT();
  if (untouched(info.state, info.completed, info.uncertain)) {
    // Cancelled before any step ran: no failure, nothing to list (issue 14).
    return (
      <div className="notice" role="status" data-testid="untouched">
        {t("recovery.untouched", { kind: t.dyn("kind", info.kind) })}{" "}
        {linkTimeline && (
          <Link href={`/jobs/${encodeURIComponent(info.jobId)}`} data-testid="timeline-link">
            {t("common.view_timeline")}
          </Link>
        )}
      </div>
    );
  }
  return (
    <div className="recovery" role="alert" data-testid="recovery">
      <strong>{t("recovery.title", { kind: t.dyn("kind", info.kind), state: t.dyn("state", info.state) })}</strong>
      <div>{info.completed && info.completed.length > 0 ? t("job.completed_steps", { steps: stepList(info.completed, t) }) : t("job.no_completed_steps")}</div>
      {info.uncertain && <div>{t("recovery.uncertain", { step: t.dyn("step", info.uncertain) })}</div>}
      {info.remaining && info.remaining.length > 0 && (
        <div>{t("recovery.remaining", { resources: info.remaining.map((r) => resourceLabel(r, t)).join(", ") })}</div>
      )}
      {linkTimeline && (
        <Link href={`/jobs/${encodeURIComponent(info.jobId)}`} data-testid="timeline-link">
          {t("common.view_timeline")}
        </Link>
      )}
    </div>
  );
}
