// Pool insights (/#/insights): how the pool is used, drawn as SVG from
// GET /api/insights (a read model over the log). No chart library: three
// small SVG charts cost nothing in the JS budget.
import { useState } from "react";
import { CommandError } from "../components/CommandError";
import { formatDuration } from "../format";
import { useT, type T } from "../i18n";
import { useLive } from "../live/store";
import { useLoad } from "../live/useLoad";
import { insightsService, type Series, type StepStat } from "../services/insights";
import { STEP_NAMES } from "../services/jobs";
import { TableWrap } from "../components/TableWrap";

export type { Series };

const RANGES = ["1d", "7d", "30d"] as const;

const W = 640;
const H = 160;
const PAD = 28;

function x(i: number, n: number): number {
  return PAD + (n <= 1 ? 0 : (i * (W - 2 * PAD)) / (n - 1));
}

function label(iso: string, range: string, lang: string): string {
  const d = new Date(iso);
  return range === "1d"
    ? d.toLocaleTimeString(lang, { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString(lang, { month: "short", day: "numeric" });
}

/** SlotsChart stacks occupied, resetting and vacant slots per bucket. */
export function SlotsChart({ s }: { s: Series }) {
  const t = useT();
  const n = s.buckets.length;
  const max = Math.max(1, ...s.buckets.map((b) => b.occupied + b.vacant + b.resetting));
  const y = (v: number) => H - PAD + 4 - (v * (H - PAD - 8)) / max;
  const layers: { key: "occupied" | "resetting" | "vacant"; cls: string }[] = [
    { key: "occupied", cls: "ins-occupied" },
    { key: "resetting", cls: "ins-resetting" },
    { key: "vacant", cls: "ins-vacant" },
  ];
  const below = s.buckets.map(() => 0);
  const paths = layers.map((l) => {
    const top = s.buckets.map((b, i) => below[i] + b[l.key]);
    const up = top.map((v, i) => `${x(i, n)},${y(v)}`);
    const down = below.map((v, i) => `${x(i, n)},${y(v)}`).reverse();
    top.forEach((v, i) => (below[i] = v));
    return { ...l, d: `M${up.join(" L")} L${down.join(" L")} Z` };
  });
  return (
    <figure>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={t("insights.slots")} data-testid="chart-slots" className="ins-chart">
        {paths.map((p) => (
          <path key={p.key} d={p.d} className={p.cls} data-layer={p.key} />
        ))}
        <text x={4} y={y(max) + 4} className="ins-axis">
          {max}
        </text>
        <text x={PAD} y={H - 4} className="ins-axis">
          {n > 0 ? label(s.buckets[0].t, s.range, t.lang) : ""}
        </text>
        <text x={W - PAD} y={H - 4} textAnchor="end" className="ins-axis">
          {n > 0 ? label(s.buckets[n - 1].t, s.range, t.lang) : ""}
        </text>
      </svg>
      <figcaption>
        <span className="ins-key ins-occupied" /> {t("lifecycle.occupied")} <span className="ins-key ins-resetting" /> {t("lifecycle.resetting")}{" "}
        <span className="ins-key ins-vacant" /> {t("lifecycle.vacant")}
      </figcaption>
    </figure>
  );
}

/** WaitChart draws the waitlist length and the median time to a slot. */
export function WaitChart({ s }: { s: Series }) {
  const t = useT();
  const n = s.buckets.length;
  const maxW = Math.max(1, ...s.buckets.map((b) => b.waiting));
  const ttl = s.buckets.map((b) => b.time_to_slot_s).filter((v): v is number => v !== null);
  const maxT = Math.max(1, ...ttl);
  const yW = (v: number) => H - PAD + 4 - (v * (H - PAD - 8)) / maxW;
  const yT = (v: number) => H - PAD + 4 - (v * (H - PAD - 8)) / maxT;
  const line = s.buckets.map((b, i) => `${x(i, n)},${yW(b.waiting)}`).join(" ");
  return (
    <figure>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={t("insights.waitlist")} data-testid="chart-waitlist" className="ins-chart">
        <polyline points={line} className="ins-line" fill="none" />
        {s.buckets.map((b, i) =>
          b.time_to_slot_s === null ? null : (
            <circle key={b.t} cx={x(i, n)} cy={yT(b.time_to_slot_s)} r={3} className="ins-dot">
              <title>{formatDuration(b.time_to_slot_s * 1000, t)}</title>
            </circle>
          ),
        )}
        <text x={4} y={yW(maxW) + 4} className="ins-axis">
          {maxW}
        </text>
        <text x={W - 4} y={yT(maxT) + 4} textAnchor="end" className="ins-axis">
          {ttl.length ? formatDuration(maxT * 1000, t) : ""}
        </text>
      </svg>
      <figcaption>
        <span className="ins-key ins-line-key" /> {t("insights.waiting")} <span className="ins-key ins-dot-key" /> {t("insights.time_to_slot")}
      </figcaption>
    </figure>
  );
}

/** secs renders a duration; below a second in milliseconds (steps are often that fast). */
function secs(s: number, t: T): string {
  return s < 1 ? `${Math.round(s * 1000)} ms` : formatDuration(s * 1000, t);
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

/** StepsTable lists median and p90 per kind and step, with bars. */
export function StepsTable({ s }: { s: Series }) {
  const t = useT();
  if (s.steps.length === 0) return <p data-testid="steps-empty">{t("insights.no_jobs")}</p>;
  const max = Math.max(1, ...s.steps.map((x) => x.p90_s));
  return (
    <TableWrap label={t("insights.durations")}>
      <table data-testid="steps-table">
        <thead>
          <tr>
            <th scope="col">{t("insights.kind")}</th>
            <th scope="col">{t("insights.step")}</th>
            <th scope="col">{t("insights.count")}</th>
            <th scope="col">{t("insights.median")}</th>
            <th scope="col">p90</th>
            <th scope="col" aria-hidden="true" />
          </tr>
        </thead>
        <tbody>
          {[...s.steps].sort(order).map((x) => (
            <tr key={x.kind + x.step}>
              <td>{t.dyn("kind", x.kind)}</td>
              <td>{stepName(t, x.step)}</td>
              <td>{x.count}</td>
              <td>{secs(x.median_s, t)}</td>
              <td>{secs(x.p90_s, t)}</td>
              <td aria-hidden="true">
                <svg width={120} height={10}>
                  <rect width={(120 * x.p90_s) / max} height={10} className="ins-p90" />
                  <rect width={(120 * x.median_s) / max} height={10} className="ins-median" />
                </svg>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

export function InsightsPage() {
  const t = useT();
  const [range, setRange] = useState<string>("7d");
  // Live enough: reload when the stream has moved by 50 events, or a snapshot came.
  const live = useLive((s) => `${Math.floor(s.position / 50)}:${s.epoch}`);
  const load = useLoad("insights", `${range}:${live}`, (signal) => insightsService.series(range, signal));
  return (
    <div data-testid="insights-page">
      <h1>{t("insights.title")}</h1>
      <div role="group" aria-label={t("insights.range")}>
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
          <h2>{t("insights.slots")}</h2>
          <SlotsChart s={load.data} />
          <h2>{t("insights.waitlist")}</h2>
          <WaitChart s={load.data} />
          <h2>{t("insights.durations")}</h2>
          <StepsTable s={load.data} />
          <p className="muted small">{t("insights.how", { bucket: load.data.bucket })}</p>
        </>
      )}
    </div>
  );
}
