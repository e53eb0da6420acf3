// Pool insights (/#/insights), from GET /api/insights (a read model over
// the log): three charts, each answering one question a pool owner asks
// (issue 27 item 9): how full was the pool, how long did people wait for a
// slot, how long does each step take. Plain SVG and CSS, no chart library:
// the bars scale with the screen, every word is HTML (legible on a 390 px
// phone; text inside a scaled SVG was 6 px there), each chart has a table.
import { useState, type ReactNode } from "react";
import { CommandError } from "../components/CommandError";
import { formatDuration, formatSpan, goDurationMs } from "../format";
import { useT, type T } from "../i18n";
import { useLive } from "../live/store";
import { useLoad } from "../live/useLoad";
import { insightsService, type Bucket, type Series, type StepStat } from "../services/insights";
import { STEP_NAMES } from "../services/jobs";
import { TableWrap } from "../components/TableWrap";

export type { Bucket, Series, StepStat };

const RANGES = ["1d", "7d", "30d"] as const;

/** label names a bucket by its start: the day, and the hour for hourly and 6-hour buckets (a day's range starts yesterday). */
function label(iso: string, range: string, lang: string): string {
  const d = new Date(iso);
  if (range === "30d") return d.toLocaleDateString(lang, { month: "short", day: "numeric" });
  return d.toLocaleString(lang, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

const covered = (b: Bucket): boolean => (b.covered_s ?? 0) > 0;
const num = (v: number, lang: string): string => v.toLocaleString(lang, { maximumFractionDigits: 1 });

/** secs renders a duration in seconds, sub-second ones in milliseconds (steps are often that fast). */
function secs(s: number, t: T): string {
  return formatSpan(s * 1000, t);
}

interface Layer {
  key: string;
  cls: string;
  name: string;
  value: (b: Bucket) => number;
}

/**
 * Bars is one bar chart over the range's buckets: stacked layers per
 * bucket, an optional mark per bucket (a p90 tick), the y axis labelled
 * in HTML at 0 and at its top, the first and last bucket under the x axis,
 * and a legend of only the layers it draws. The SVG stretches to the
 * width; it holds no text.
 */
function Bars({
  s,
  layers,
  top,
  topLabel,
  axis,
  mark,
  summary,
  testId,
}: {
  s: Series;
  layers: Layer[];
  top: number;
  topLabel: string;
  axis: string;
  mark?: { cls: string; name: string; value: (b: Bucket) => number | null };
  summary: string;
  testId: string;
}) {
  const t = useT();
  const n = s.buckets.length;
  const H = 100;
  const y = (v: number) => H - (Math.min(v, top) * H) / Math.max(top, 1e-9);
  const drawn = layers.filter((l) => s.buckets.some((b) => l.value(b) > 0));
  const marks = mark ? s.buckets.map((b) => mark.value(b)) : [];
  const markDrawn = marks.some((v) => v !== null);
  return (
    <figure className="ins-figure">
      <div className="ins-plot">
        <div className="ins-y" aria-hidden="true">
          <span>{topLabel}</span>
          <span>0</span>
        </div>
        <svg viewBox={`0 0 ${Math.max(n, 1)} ${H}`} preserveAspectRatio="none" role="img" aria-label={summary} data-testid={testId} className="ins-chart">
          <line x1={0} x2={Math.max(n, 1)} y1={0.5} y2={0.5} className="ins-grid" vectorEffect="non-scaling-stroke" />
          {s.buckets.map((b, i) => {
            let below = 0;
            return (
              <g key={b.t}>
                {drawn.map((l) => {
                  const v = l.value(b);
                  if (v <= 0) return null;
                  const r = <rect key={l.key} x={i + 0.1} width={0.8} y={y(below + v)} height={y(below) - y(below + v)} className={l.cls} data-layer={l.key} />;
                  below += v;
                  return r;
                })}
                {mark && marks[i] !== null && (
                  <line x1={i + 0.05} x2={i + 0.95} y1={y(marks[i] as number)} y2={y(marks[i] as number)} className={mark.cls} data-layer="mark" vectorEffect="non-scaling-stroke" />
                )}
              </g>
            );
          })}
        </svg>
      </div>
      <div className="ins-x" aria-hidden="true">
        <span>{n > 0 ? label(s.buckets[0].t, s.range, t.lang) : ""}</span>
        <span>{n > 0 ? label(s.buckets[n - 1].t, s.range, t.lang) : ""}</span>
      </div>
      <div className="ins-axis-title muted" aria-hidden="true">
        <span>{axis}</span>
      </div>
      {(drawn.length > 0 || markDrawn) && (
        <figcaption className="ins-legend" data-testid={`${testId}-legend`}>
          {drawn.map((l) => (
            <span key={l.key} data-key={l.key}>
              <span className={`ins-key ${l.cls}`} /> {l.name}
            </span>
          ))}
          {mark && markDrawn && (
            <span data-key="mark">
              <span className={`ins-key ins-key-line ${mark.cls}`} /> {mark.name}
            </span>
          )}
        </figcaption>
      )}
    </figure>
  );
}

/** AsTable is a chart's numbers as a table, folded under the chart. */
function AsTable({ label: name, head, rows, testId }: { label: string; head: string[]; rows: ReactNode[][]; testId: string }) {
  const t = useT();
  return (
    <details className="ins-table">
      <summary>{t("insights.as_table")}</summary>
      <TableWrap label={name}>
        <table data-testid={testId}>
          <thead>
            <tr>
              {head.map((h) => (
                <th key={h} scope="col">
                  {h}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.map((r, i) => (
              <tr key={i}>
                {r.map((c, j) => (j === 0 ? <th key={j} scope="row">{c}</th> : <td key={j}>{c}</td>))}
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </details>
  );
}

/** firstCovered is the first bucket the log covers (-1: none). */
function firstCovered(s: Series): number {
  return s.buckets.findIndex(covered);
}

/** UseChart: how full was the pool? Slots in use, busy and vacant, averaged over each bucket. */
export function UseChart({ s }: { s: Series }) {
  const t = useT();
  const last = s.buckets[s.buckets.length - 1];
  const total = Math.max(1, ...s.buckets.map((b) => (b.occupied_avg ?? 0) + (b.busy_avg ?? 0) + (b.vacant_avg ?? 0)), last ? last.occupied + last.resetting + last.vacant : 0);
  const peak = Math.max(0, ...s.buckets.map((b) => b.in_use_peak ?? 0));
  const first = firstCovered(s);
  const layers: Layer[] = [
    { key: "occupied", cls: "ins-occupied", name: t("insights.in_use"), value: (b) => b.occupied_avg ?? 0 },
    { key: "busy", cls: "ins-resetting", name: t("insights.busy"), value: (b) => b.busy_avg ?? 0 },
    { key: "vacant", cls: "ins-vacant", name: t("insights.vacant"), value: (b) => b.vacant_avg ?? 0 },
  ];
  const summary = t("insights.use_summary", { peak, total: Math.round(total) });
  return (
    <>
      {last && (
        <p className="ins-now" data-testid="ins-now">
          {t("insights.now", { in_use: last.occupied, busy: last.resetting, vacant: last.vacant })}
        </p>
      )}
      {first < 0 ? (
        <p data-testid="use-empty">{t("insights.no_data")}</p>
      ) : (
        <>
          <p className="muted small" data-testid="use-summary">
            {summary}
            {first > 0 && <> {t("insights.starts", { time: label(s.buckets[first].t, s.range, t.lang) })}</>}
          </p>
          <Bars s={s} layers={layers} top={total} topLabel={num(total, t.lang)} axis={t("insights.axis_slots")} summary={summary} testId="chart-slots" />
          <AsTable
            label={t("insights.use_q")}
            testId="use-table"
            head={[t("insights.time"), t("insights.in_use"), t("insights.busy_short"), t("insights.vacant"), t("insights.peak")]}
            rows={s.buckets.filter(covered).map((b) => [
              label(b.t, s.range, t.lang),
              num(b.occupied_avg ?? 0, t.lang),
              num(b.busy_avg ?? 0, t.lang),
              num(b.vacant_avg ?? 0, t.lang),
              b.in_use_peak ?? 0,
            ])}
          />
        </>
      )}
    </>
  );
}

/** WaitChart: how long did people wait for a slot? Join → accepted offer, median bars with a p90 mark, per bucket. */
export function WaitChart({ s }: { s: Series }) {
  const t = useT();
  const handed = s.buckets.reduce((n, b) => n + (b.handed_over ?? (b.time_to_slot_s !== null ? 1 : 0)), 0);
  const longest = Math.max(0, ...s.buckets.map((b) => b.waiting_peak ?? b.waiting));
  const top = Math.max(1, ...s.buckets.map((b) => Math.max(b.time_to_slot_p90_s ?? 0, b.time_to_slot_s ?? 0)));
  if (handed === 0) {
    return (
      <p data-testid="wait-empty">
        {t("insights.no_wait")} {longest > 0 && t("insights.longest_waitlist", { count: longest })}
      </p>
    );
  }
  const summary = t("insights.wait_summary", { count: handed, longest });
  return (
    <>
      <p className="muted small" data-testid="wait-summary">
        {summary}
      </p>
      <Bars
        s={s}
        layers={[{ key: "median", cls: "ins-median", name: t("insights.median_wait"), value: (b) => b.time_to_slot_s ?? 0 }]}
        mark={{ cls: "ins-p90-line", name: t("insights.p90_wait"), value: (b) => b.time_to_slot_p90_s ?? null }}
        top={top}
        topLabel={secs(top, t)}
        axis={t("insights.axis_wait")}
        summary={summary}
        testId="chart-waitlist"
      />
      <AsTable
        label={t("insights.wait_q")}
        testId="wait-table"
        head={[t("insights.time"), t("insights.handed_over"), t("insights.median"), t("insights.p90"), t("insights.longest")]}
        rows={s.buckets
          .filter((b) => b.time_to_slot_s !== null || (b.waiting_peak ?? 0) > 0)
          .map((b) => [
            label(b.t, s.range, t.lang),
            b.handed_over ?? (b.time_to_slot_s !== null ? 1 : 0),
            b.time_to_slot_s !== null ? secs(b.time_to_slot_s, t) : "—",
            b.time_to_slot_p90_s != null ? secs(b.time_to_slot_p90_s, t) : "—",
            b.waiting_peak ?? b.waiting,
          ])}
      />
    </>
  );
}

/** order puts a kind's steps in the order jobs run them, the whole job last. */
function order(a: StepStat, b: StepStat): number {
  if (a.kind !== b.kind) return a.kind < b.kind ? -1 : 1;
  const rank = (x: string) => (x === "job" ? 1000 : (STEP_NAMES as readonly string[]).indexOf(x));
  return rank(a.step) - rank(b.step);
}

function stepName(t: T, s: string): string {
  return s === "job" ? t("insights.whole_job") : t.dyn("step", s);
}

/**
 * StepsChart: how long does each step take? Per job kind, one row per
 * step: its name, a bar (median solid, p90 light, on the kind's own scale)
 * and the numbers in words, which are the chart's text.
 */
export function StepsChart({ s }: { s: Series }) {
  const t = useT();
  if (s.steps.length === 0) return <p data-testid="steps-empty">{t("insights.no_jobs")}</p>;
  const kinds = [...new Set([...s.steps].sort(order).map((x) => x.kind))];
  return (
    <div data-testid="steps-chart">
      <p className="ins-legend" aria-hidden="true">
        <span>
          <span className="ins-key ins-median" /> {t("insights.median")}
        </span>
        <span>
          <span className="ins-key ins-p90" /> {t("insights.p90")}
        </span>
      </p>
      {kinds.map((kind) => {
        const rows = s.steps.filter((x) => x.kind === kind).sort(order);
        const max = Math.max(1e-9, ...rows.map((x) => x.p90_s));
        return (
          <section key={kind} aria-label={t.dyn("kind", kind)}>
            <h3>{t.dyn("kind", kind)}</h3>
            <ul className="ins-steps" data-testid="steps-rows" data-kind={kind}>
              {rows.map((x) => (
                <li key={x.step} className={x.step === "job" ? "ins-step ins-step-job" : "ins-step"} data-step={x.step}>
                  <span className="ins-step-name">{stepName(t, x.step)}</span>
                  <span className="ins-track" aria-hidden="true">
                    <span className="ins-bar ins-p90" style={{ width: `${(100 * x.p90_s) / max}%` }} />
                    <span className="ins-bar ins-median" style={{ width: `${(100 * x.median_s) / max}%` }} />
                  </span>
                  <span className="ins-step-nums small">{t(x.count === 1 ? "insights.step_nums_one" : "insights.step_nums", { median: secs(x.median_s, t), p90: secs(x.p90_s, t), count: x.count })}</span>
                </li>
              ))}
            </ul>
          </section>
        );
      })}
    </div>
  );
}

/** bucketWords is a bucket's size for a person ("6h", "1d"), never Go's "6h0m0s". */
function bucketWords(bucket: string, t: T): string {
  const ms = goDurationMs(bucket);
  return ms === undefined ? bucket : formatDuration(ms, t);
}

export function InsightsPage() {
  const t = useT();
  const [range, setRange] = useState<string>("1d");
  // Live enough: reload when the stream has moved by 50 events, or a snapshot came.
  const live = useLive((s) => `${Math.floor(s.position / 50)}:${s.epoch}`);
  const load = useLoad("insights", `${range}:${live}`, (signal) => insightsService.series(range, signal));
  return (
    <div data-testid="insights-page" className="insights">
      <h1>{t("insights.title")}</h1>
      <div role="group" aria-label={t("insights.range")} className="ins-ranges">
        {RANGES.map((r) => (
          <button key={r} aria-pressed={r === range} onClick={() => setRange(r)} data-testid={`range-${r}`}>
            {t(`insights.range_${r}` as "insights.range_1d")}
          </button>
        ))}
      </div>
      {load.error && !load.data && <CommandError error={load.error} />}
      {!load.data && !load.error && <p>{t("common.loading")}</p>}
      {load.data && (
        <>
          <section aria-labelledby="ins-use" data-testid="ins-use">
            <h2 id="ins-use">{t("insights.use_q")}</h2>
            <UseChart s={load.data} />
          </section>
          <section aria-labelledby="ins-wait" data-testid="ins-wait">
            <h2 id="ins-wait">{t("insights.wait_q")}</h2>
            <WaitChart s={load.data} />
          </section>
          <section aria-labelledby="ins-steps" data-testid="ins-steps">
            <h2 id="ins-steps">{t("insights.steps_q")}</h2>
            <StepsChart s={load.data} />
          </section>
          <p className="muted small">{t("insights.how", { bucket: bucketWords(load.data.bucket, t) })}</p>
        </>
      )}
    </div>
  );
}
