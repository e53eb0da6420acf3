import type React from "react";
import { Link } from "wouter";
import type { StepView } from "../services/jobs";
import type { Resource } from "../services/resources";
import { failureRawLabel, failureText, resourceLabel, stepList, untouched } from "../format";
import { useT } from "../i18n";

export interface RecoveryInfo {
  jobId: string;
  kind: string;
  state: string;
  completed: readonly string[] | null;
  uncertain?: string;
  remaining: readonly Resource[] | null;
  /** The step that failed or hung, its HTTP status and the raw error chain, when the job view is at hand. */
  failedStep?: string;
  http?: number;
  error?: string;
  /** The failure as a code and parts (the step's error_code/error_args, else the job's reason_code/reason_args). */
  errorCode?: string;
  errorArgs?: Record<string, string>;
  /** The job's reason (a provider's or the server's own words). */
  reason?: string;
}

/** failureOf finds the step a job stopped at, for the one sentence a failure leads with. */
export function failureOf(steps: readonly StepView[] | null, uncertain?: string): Pick<RecoveryInfo, "failedStep" | "http" | "error" | "errorCode" | "errorArgs"> {
  const s = (steps ?? []).find((x) => x.state === "failed" || x.name === uncertain) ?? (steps ?? []).find((x) => x.state === "running");
  return s ? { failedStep: s.name, http: s.http_status || undefined, error: s.error, errorCode: s.error_code, errorArgs: s.error_args } : {};
}

/**
 * FailureSentence is what a failed job says first (issue 27 item 6): one
 * plain sentence in the reader's language — the step it stopped at and why
 * in words (a provider's HTTP status, a hang) — and what to do next. The
 * raw error chain stays under "Details".
 */
export function FailureSentence({ info, resumable }: { info: RecoveryInfo; resumable: boolean }) {
  const t = useT();
  const kind = t.dyn("kind", info.kind);
  const step = info.failedStep ? t.dyn("step", info.failedStep) : "";
  const why = info.errorCode
    ? // The server's code for the failure, in the reader's words (the provider's text is under the fold).
      failureText({ code: info.errorCode, args: info.errorArgs, status: info.http, target: false }, t)
    : info.state === "timed_out"
      ? t("fail.why_timeout")
      : info.state === "abandoned"
        ? t("fail.why_abandoned")
        : info.http
          ? info.http >= 500
            ? t("fail.why_http_server", { status: info.http })
            : info.http === 401 || info.http === 403
              ? t("fail.why_http_denied", { status: info.http })
              : info.http === 404
                ? t("fail.why_http_missing", { status: info.http })
                : t("fail.why_http", { status: info.http })
          : info.error || info.reason
            ? t("fail.why_other")
            : t("fail.why_on_timeline");
  const what = info.uncertain
    ? t("fail.todo_uncertain", { step: t.dyn("step", info.uncertain) })
    : resumable
      ? info.http === 401 || info.http === 403
        ? t("fail.todo_denied")
        : t("fail.todo_resume")
      : t("fail.todo_none");
  const chain = [info.error, info.reason].filter((x): x is string => !!x && x.trim() !== "");
  return (
    <div className="failure" data-testid="failure">
      <p data-testid="failure-sentence">
        <strong>{step ? t("fail.sentence_step", { kind, step, why }) : t("fail.sentence", { kind, why })}</strong>
      </p>
      <p data-testid="failure-todo">{what}</p>
      {chain.length > 0 && (
        <details data-testid="failure-details">
          <summary>{failureRawLabel({ code: info.errorCode }, t)}</summary>
          <pre className="step-error" lang="en">{[...new Set(chain)].join("\n")}</pre>
        </details>
      )}
    </div>
  );
}

/**
 * RecoveryNotice is every failure/recovery message of the app: it names the
 * completed steps, the uncertain step and what remains, and links to the
 * job's timeline.
 */
export function RecoveryNotice({ info, linkTimeline = true, resumable = false, children }: { info: RecoveryInfo; linkTimeline?: boolean; resumable?: boolean; children?: React.ReactNode }) {
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
      <FailureSentence info={info} resumable={resumable} />
      {children}
      <div className="muted small">{t("recovery.title", { kind: t.dyn("kind", info.kind), state: t.dyn("state", info.state) })}</div>
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
