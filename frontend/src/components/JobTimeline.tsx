import * as Collapsible from "@radix-ui/react-collapsible";
import { useState } from "react";
import type { JobView, RecordedEvent } from "../services/jobs";
import { failureText, formatSpan, formatTime, resourceLabel, stepDetail } from "../format";
import { FailureRaw } from "./FailureRaw";
import { useT, type Key, type T } from "../i18n";
import { useJobLimits } from "../auth/links";
import { useNow } from "../live/ticker";
import { buildTimeline, type Bar, type WaitKind } from "../pages/timelineModel";
import { StateBadge } from "../ui/Badge";
import { stepTone } from "../ui/tone";

const WAIT_KEY: Record<WaitKind, Key> = {
  grace: "tl.wait.grace",
  queue: "tl.wait.queue",
  between_attempts: "tl.wait.between",
  provider: "tl.wait.provider",
};

/** clockTime is the time of day alone (a timeout is minutes away, never another day). */
function clockTime(ms: number, lang: string): string {
  return new Intl.DateTimeFormat(lang === "ko" ? "ko-KR" : "en-US", { hour: "numeric", minute: "2-digit", second: "2-digit" }).format(ms);
}

/** The phases of a wait on Coolify (events.Wait*), worded as job.wait.<phase>. */
const PROVIDER_PHASE_KEY: Record<string, Key> = {
  queued: "job.wait.queued",
  building: "job.wait.building",
  starting: "job.wait.starting",
  health: "job.wait.health",
  database: "job.wait.database",
};

/** barLabel is a bar's row title in the reader's language. */
function barLabel(b: Bar, t: T): string {
  if (b.kind === "wait" && b.wait === "provider") {
    const key = PROVIDER_PHASE_KEY[b.phase ?? ""];
    // A known phase's words already name Coolify ("queued in Coolify behind …").
    return key ? t(key, { ahead: 0, building: 0, status: "", ...b.phaseArgs }) : t("tl.wait.provider", { phase: b.phase ?? "" });
  }
  if (b.kind === "wait") return t(WAIT_KEY[b.wait ?? "queue"]);
  return t.dyn("step", b.step ?? "");
}

/**
 * JobTimeline draws the job on a time axis (Temporal's Timeline view):
 * one bar per step and attempt, waits (grace, queue, between attempts, a
 * provider's phases) hatched apart from work, a running step growing to
 * now with a line where it will time out. Each row unfolds its details
 * and events (Radix Collapsible). Working and waiting time are summed
 * above it.
 */
export function JobTimeline({ job, events }: { job: JobView; events: readonly RecordedEvent[] }) {
  const t = useT();
  const now = useNow();
  const limits = useJobLimits();
  const tl = buildTimeline(job, events, now, limits);
  const timeouts = tl.bars.flatMap((b) => (b.timeoutAt ? [b.timeoutAt] : []));
  const axisEnd = Math.max(tl.end, ...timeouts);
  const span = Math.max(1, axisEnd - tl.start);
  const pct = (at: number) => `${(((at - tl.start) / span) * 100).toFixed(3)}%`;
  const width = (b: Bar) => `${(((b.end - b.start) / span) * 100).toFixed(3)}%`;
  // The caveat every Coolify delete shares is said once, under the timeline (issue 35 item 8).
  const caveat = tl.bars.some((b) => b.view?.detail_code === "row_gone_only");
  return (
    <section aria-labelledby="tl-title" className="tl" data-testid="job-timeline">
      <div className="tl-head">
        <h2 id="tl-title">{t("tl.title")}</h2>
        <span className="tl-sum" data-testid="tl-sum">
          <span className="tl-key tl-key-work" aria-hidden="true" /> {t("tl.working", { time: formatSpan(tl.workMs, t) })}
          {"  "}
          <span className="tl-key tl-key-wait" aria-hidden="true" /> {t("tl.waiting", { time: formatSpan(tl.waitMs, t) })}
        </span>
      </div>
      <div className="tl-axis" aria-hidden="true">
        <span>{formatTime(new Date(tl.start).toISOString(), t.lang, { seconds: true })}</span>
        <span>+{formatSpan((axisEnd - tl.start) / 2, t)}</span>
        <span>+{formatSpan(axisEnd - tl.start, t)}</span>
      </div>
      <ol className="tl-rows">
        {tl.bars.map((b) => (
          <TimelineRow key={b.key} b={b} left={pct(b.start)} width={width(b)} timeoutLeft={b.timeoutAt ? pct(b.timeoutAt) : undefined} now={now} />
        ))}
      </ol>
      {caveat && (
        <p className="muted small" data-testid="tl-caveat">
          * {t("stepdetail.row_gone_only")}
        </p>
      )}
    </section>
  );
}

function TimelineRow({ b, left, width, timeoutLeft, now }: { b: Bar; left: string; width: string; timeoutLeft?: string; now: number }) {
  const t = useT();
  const [open, setOpen] = useState(false);
  const took = formatSpan(b.end - b.start, t);
  const v = b.view;
  return (
    <li
      className={`tl-row tl-${b.kind}${b.open ? " tl-open" : ""}${b.pending ? " tl-pending" : ""}`}
      data-testid="tl-row"
      data-kind={b.kind}
      data-wait={b.wait}
      data-step={b.step}
      data-attempt={b.attempt || undefined}
      data-state={b.state}
    >
      <Collapsible.Root open={open} onOpenChange={setOpen}>
        <div className="tl-line">
          <Collapsible.Trigger className="tl-label sk-plain" data-testid="tl-toggle">
            <span className="tl-caret" aria-hidden="true">
              {open ? "▾" : "▸"}
            </span>
            <span className="tl-name">{barLabel(b, t)}</span>
            {b.kind === "work" && (b.attempt ?? 0) > 0 && <span className="muted small nowrap"> #{b.attempt}</span>}
          </Collapsible.Trigger>
          <div className="tl-track">
            {!b.pending && <span className="tl-bar" data-tone={b.kind === "wait" ? "wait" : stepTone(b.state)} style={{ left, width }} />}
            {timeoutLeft && <span className="tl-timeout" style={{ left: timeoutLeft }} aria-hidden="true" />}
          </div>
          <div className="tl-facts small">
            {b.kind === "work" ? <StateBadge tone={stepTone(b.state)}>{t.dyn("stepstate", b.state)}</StateBadge> : <StateBadge tone="wait">{t("tl.wait")}</StateBadge>}{" "}
            {!b.pending && <span data-testid="tl-took">{b.open ? t("tl.so_far", { time: took }) : took}</span>}
            {v?.http_status ? <span className="tl-http">{t("job.http_status", { status: v.http_status })}</span> : null}
            {b.timeoutAt && (
              <span className="tl-times-out" data-testid="tl-times-out">
                {" · "}
                {b.timeoutAt > now
                  ? t("tl.times_out", { time: clockTime(b.timeoutAt, t.lang), left: formatSpan(b.timeoutAt - now, t) })
                  : t("tl.timing_out")}
              </span>
            )}
            {b.link && (
              <>
                {" · "}
                <a href={b.link} target="_blank" rel="noopener noreferrer">
                  {t("tl.provider_link")}
                </a>
              </>
            )}
          </div>
        </div>
        <Collapsible.Content className="tl-detail" data-testid="tl-detail">
          {v?.resource && <p>{resourceLabel(v.resource, t)}</p>}
          {v?.detail && v.detail_code !== "row_gone_only" && <p>{stepDetail(v, t)}</p>}
          {v?.detail_code === "row_gone_only" && <p>{t("tl.deleted_record")} *</p>}
          {(v?.error || v?.error_code) && (
            // The failure in the reader's words; the provider's own answer is data, in its own language: folded, marked as English.
            <div className="tl-failure" data-testid="tl-failure">
              <p>{failureText({ code: v.error_code, args: v.error_args }, t)}</p>
              <FailureRaw failure={{ code: v.error_code, raw: v.error }} className="tl-error-details" />
            </div>
          )}
          {b.events.length > 0 && (
            <ul className="tl-events">
              {b.events.map((e) => (
                <li key={e.position} className="small">
                  <span className="muted">#{e.revision}</span> {t.dyn("event", e.type)}{" "}
                  <span className="muted">{formatTime(e.meta?.time, t.lang, { seconds: true })}</span>
                </li>
              ))}
            </ul>
          )}
        </Collapsible.Content>
      </Collapsible.Root>
    </li>
  );
}
