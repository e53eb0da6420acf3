import { useState } from "react";
import { Link, useLocation } from "wouter";
import { fromLocalInput, momentHref } from "./moment";
import { replayService, type SlotChange } from "../services/replay";
import type { Resource } from "../services/resources";
import { Actor } from "../components/Actor";
import { CommandError } from "../components/CommandError";
import { LoadFallback } from "../components/LoadFallback";
import { formatTime, stateReason } from "../format";
import { useT, type Key } from "../i18n";
import { useLoad } from "../live/useLoad";
import { PullRequestInfo } from "../pullrequests/PullRequestInfo";
import "./replay.css";

/** decodeAt undoes the link's encoding (the router decodes only part of it). */
export function decodeAt(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * SlotAsOfPage (issue 28): the slot as the server's read model held it at a
 * moment (a log position or a time), clearly marked "as of …, not live",
 * with the way back to live and the slot's timeline up to that moment.
 */
export function SlotAsOfPage({ name, at }: { name: string; at: string }) {
  const t = useT();
  const load = useLoad(`slot-at:${name}`, `${name}@${at}`, (signal) => replayService.slotAt(name, at, signal));
  const s = load.data;
  if (!s) {
    return (
      <section data-testid="slot-asof">
        <p>
          <Link href={`/slots/${encodeURIComponent(name)}`}>← {t("asof.back")}</Link>
        </p>
        {load.error && load.error.status === 400 ? <CommandError error={load.error} /> : <LoadFallback load={load} notFound={t("asof.not_found", { name })} />}
      </section>
    );
  }
  const when = formatTime(s.as_of.time, t.lang, { seconds: true });
  return (
    <section aria-labelledby="slot-title" data-testid="slot-asof">
      <div className="asof-banner" role="status" data-testid="asof-banner" data-live={s.as_of.live ? "true" : "false"}>
        <span>{s.as_of.live ? t("asof.live_banner", { time: when }) : t("asof.banner", { time: when, position: s.as_of.position })}</span>{" "}
        <Link href={`/slots/${encodeURIComponent(name)}`} data-testid="asof-back">
          {t("asof.back")}
        </Link>
      </div>
      <div className="page-head">
        <h1 id="slot-title">{s.name}</h1>
        <span className={`badge lc lc-${s.lifecycle}`} data-testid="slot-lifecycle">
          {t.dyn("lifecycle", s.lifecycle)}
        </span>
      </div>
      <dl className="facts">
        <dt>{t("slot.occupant")}</dt>
        <dd data-testid="asof-occupant">{s.occupant ?? t("asof.none")}</dd>
        <dt>{t("slot.deadline")}</dt>
        <dd>{s.deadline ? formatTime(s.deadline, t.lang) : t("slot.no_deadline")}</dd>
        <dt>{t("asof.field.active_job")}</dt>
        <dd>
          {s.active_job ? (
            <Link href={`/jobs/${encodeURIComponent(s.active_job.id)}`}>
              {t.dyn("kind", s.active_job.kind)} · {t.dyn("state", s.active_job.state)}
            </Link>
          ) : (
            t("asof.none")
          )}
        </dd>
        {s.state_reason && (
          <>
            <dt>{t("slot.state_reason")}</dt>
            <dd>{stateReason(s, t)}</dd>
          </>
        )}
      </dl>
      {/* The pull request that held the slot then (its stream is replayed too). */}
      <PullRequestInfo slot={s} />
      <h2>{t("slot.resources")}</h2>
      {s.resources && s.resources.length > 0 ? (
        <ul data-testid="asof-resources">
          {s.resources.map((r) => (
            <li key={`${r.kind}:${r.id}`} data-resource={`${r.kind}:${r.id}`}>
              {t.dyn("res", r.kind)} <code className="id">{r.id}</code>
            </li>
          ))}
        </ul>
      ) : (
        <p>{t("slot.no_resources")}</p>
      )}
      <SlotMoment name={name} />
      <SlotTimeline name={name} at={at} open />
    </section>
  );
}

/** SlotMoment: a date-time field that opens the slot as it was then. */
export function SlotMoment({ name }: { name: string }) {
  const t = useT();
  const [, navigate] = useLocation();
  const [v, setV] = useState("");
  return (
    <form
      className="actions asof-moment"
      onSubmit={(e) => {
        e.preventDefault();
        const at = fromLocalInput(v);
        if (at) navigate(momentHref(name, at));
      }}
    >
      <label>
        {t("asof.moment")} <input type="datetime-local" step={1} value={v} required onChange={(e) => setV(e.target.value)} data-testid="asof-time" />
      </label>
      <button type="submit" data-testid="asof-show">
        {t("asof.show")}
      </button>
    </form>
  );
}

const FIELD_KEY: Record<SlotChange["field"], Key> = {
  occupant: "asof.field.occupant",
  deadline: "asof.field.deadline",
  lifecycle: "asof.field.lifecycle",
  resource: "asof.field.resource",
  active_job: "asof.field.active_job",
  pull_request: "asof.field.pull_request",
};

/**
 * SlotTimeline lists what changed on the slot (occupancies, jobs,
 * resources, lifecycle), newest first, up to at (now if absent); every row
 * links to the slot at that moment. Closed, it loads nothing.
 */
export function SlotTimeline({ name, at, open = false }: { name: string; at?: string; open?: boolean }) {
  const t = useT();
  const [shown, setShown] = useState(open);
  return (
    <details className="asof-timeline" open={shown} onToggle={(e) => setShown(e.currentTarget.open)} data-testid="asof-timeline">
      <summary>
        <h2>{t("asof.timeline")}</h2> <span className="muted small">{t("asof.timeline_open")}</span>
      </summary>
      {shown && <TimelineRows name={name} at={at} />}
    </details>
  );
}

function TimelineRows({ name, at }: { name: string; at?: string }) {
  const t = useT();
  const load = useLoad(`slot-changes:${name}`, `${name}@${at ?? ""}`, (signal) => replayService.changes(name, undefined, at, signal));
  if (load.error) return <CommandError error={load.error} />;
  if (!load.data) return <p>{t("common.loading")}</p>;
  const rows = [...load.data.changes].reverse();
  if (rows.length === 0) return <p>{t("asof.timeline_empty")}</p>;
  const value = (c: SlotChange, v: SlotChange["before"]): string => {
    if (v === null) return t("asof.none");
    if (typeof v === "string") {
      if (c.field === "lifecycle") return t.dyn("lifecycle", v);
      if (c.field === "deadline") return formatTime(v, t.lang);
      return v;
    }
    if (c.field === "active_job") return `${t.dyn("kind", v.kind)} ${v.id}`;
    return `${t.dyn("res", (v as Resource).kind)} ${(v as Resource).id}`;
  };
  const older = load.data.next_to;
  return (
    <>
      <ol className="timeline asof-rows" data-testid="asof-rows">
        {rows.map((c, i) => (
          <li key={`${c.position}:${c.field}:${i}`} data-field={c.field} data-position={c.position}>
            <span className="muted small nowrap">{formatTime(c.time, t.lang, { seconds: true })}</span>{" "}
            <strong>{t(FIELD_KEY[c.field])}</strong>{" "}
            {c.field === "resource" ? (
              <span>
                {c.change === "lost" ? t("asof.lost") : t("asof.gained")}: {value(c, c.change === "lost" ? c.before : c.after)}
              </span>
            ) : (
              <span>
                {value(c, c.before)} → {value(c, c.after)}
              </span>
            )}{" "}
            <span className="muted small">
              {t.dyn("event", c.type)} · <Actor actor={c.actor} />
            </span>{" "}
            <Link href={momentHref(name, c.position)} data-testid="asof-row-link">
              {t("asof.here")}
            </Link>
          </li>
        ))}
      </ol>
      {older !== undefined && (
        // The answer holds the newest changes only (issue 33): the older ones are the timeline of an earlier moment.
        <p className="muted small">
          <Link href={momentHref(name, older)} data-testid="asof-older">
            {t("asof.timeline_older", { position: older })}
          </Link>
        </p>
      )}
    </>
  );
}
