import type { StepView, StepWait } from "../services/jobs";
import { StateBadge } from "../ui/Badge";
import { stepTone } from "../ui/tone";
import { failureText, formatDuration, formatSpan, formatTime, resourceLabel, stepDetail } from "../format";
import { FailureRaw } from "./FailureRaw";
import { useT } from "../i18n";
import { useNow } from "../live/ticker";

/**
 * Elapsed is how long a step has been running, from the server clock. It
 * owns no timer: the global ticker re-renders it (and only it) each second.
 */
function Elapsed({ since }: { since: string }) {
  const t = useT();
  const now = useNow();
  const start = Date.parse(since);
  if (Number.isNaN(start)) return null;
  return (
    <span className="muted" data-testid="step-elapsed">
      {t("job.step_elapsed", { time: formatDuration(Math.max(0, now - start), t) })}
    </span>
  );
}

const WAIT_PHASES = ["queued", "building", "starting", "health", "database"] as const;

/**
 * Waiting is a running step's wait on Coolify (issue 32): its phase in the
 * reader's language, for how long, and a link to the deployment's page.
 */
function Waiting({ wait }: { wait: StepWait }) {
  const t = useT();
  const known = (WAIT_PHASES as readonly string[]).includes(wait.phase);
  const text = known
    ? t(`job.wait.${wait.phase as (typeof WAIT_PHASES)[number]}`, {
        ahead: wait.ahead ?? 0,
        building: wait.building ?? 0,
        status: wait.status ?? "",
      })
    : wait.phase;
  return (
    <div className="muted" data-testid="step-wait" data-phase={wait.phase}>
      {text}
      {" · "}
      <SinceSpan since={wait.since} />
      {wait.url && (
        <>
          {" · "}
          <a href={wait.url} target="_blank" rel="noopener noreferrer" data-testid="step-wait-link">
            {t("job.wait.open")}
          </a>
        </>
      )}
    </div>
  );
}

function SinceSpan({ since }: { since: string }) {
  const t = useT();
  const now = useNow();
  const start = Date.parse(since);
  if (Number.isNaN(start)) return null;
  return <span>{t("job.wait.since", { time: formatDuration(Math.max(0, now - start), t) })}</span>;
}

/** Steps lists a job's steps with their state, times, HTTP status and error. */
export function Steps({ steps, uncertain }: { steps: readonly StepView[]; uncertain?: string }) {
  const t = useT();
  return (
    <ol className="steps" data-testid="steps">
      {steps.map((s) => {
        const state = s.name === uncertain && s.state !== "done" ? "uncertain" : s.state;
        return (
          <li key={s.name} className={`step step-${state}`} data-step={s.name} data-state={state}>
            <span className="step-name">{t.dyn("step", s.name)}</span>{" "}
            <StateBadge tone={stepTone(state)}>{t.dyn("stepstate", state)}</StateBadge>
            {s.resource && <span className="muted"> · {resourceLabel(s.resource, t)}</span>}
            {s.attempt ? <span className="muted"> · #{s.attempt}</span> : null}
            {s.started_at && <span className="muted"> · {t("job.step_started", { time: formatTime(s.started_at, t.lang, { seconds: true }) })}</span>}
            {s.started_at && !s.ended_at && state === "running" && (
              <>
                {" · "}
                <Elapsed since={s.started_at} />
              </>
            )}
            {s.ended_at && <span className="muted"> · {t("job.step_ended", { time: formatTime(s.ended_at, t.lang, { seconds: true }) })}</span>}
            {s.started_at && s.ended_at && (
              <span className="muted" data-testid="step-took">
                {" · "}
                {t("jobt.step_took", { time: formatSpan(Date.parse(s.ended_at) - Date.parse(s.started_at), t) })}
              </span>
            )}
            {s.http_status ? <span className="http"> · {t("job.http_status", { status: s.http_status })}</span> : null}
            {(s.error || s.error_code) && (
              <div className="step-failure" data-testid="step-failure">
                {failureText({ code: s.error_code, args: s.error_args }, t)}
                <FailureRaw failure={{ code: s.error_code, raw: s.error }} className="step-error-details" />
              </div>
            )}
            {s.wait && state === "running" && <Waiting wait={s.wait} />}
            {s.no_health_check && state === "done" && (
              <div className="muted" data-testid="step-no-health-check">
                {t("job.no_health_check")}
              </div>
            )}
            {s.detail && <div className="muted">{stepDetail(s, t)}</div>}
          </li>
        );
      })}
    </ol>
  );
}

/** completedSteps names the steps of a job that are confirmed done. */
export function completedSteps(steps: readonly StepView[] | null): string[] {
  return (steps ?? []).filter((s) => s.state === "done").map((s) => s.name);
}
