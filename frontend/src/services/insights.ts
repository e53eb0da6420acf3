// Pool insights (GET /api/insights?range=1d|7d|30d, docs/waitlist.md
// "Insights"): how the pool is used, a read model over the log.
import * as v from "valibot";
import { request } from "./http";
import { decoder, int, str } from "./wire";

export const Bucket = v.object({
  t: str,
  occupied: v.number(),
  vacant: v.number(),
  resetting: v.number(),
  waiting: v.number(),
  time_to_slot_s: v.nullable(v.number()),
  // Over the bucket, time-weighted over the part of it the log covers
  // (covered_s; 0 = no data yet). Absent from an older server: read as 0.
  occupied_avg: v.optional(v.number()),
  busy_avg: v.optional(v.number()),
  vacant_avg: v.optional(v.number()),
  in_use_peak: v.optional(v.number()),
  covered_s: v.optional(v.number()),
  waiting_peak: v.optional(v.number()),
  handed_over: v.optional(v.number()),
  time_to_slot_p90_s: v.optional(v.nullable(v.number())),
});
export type Bucket = v.InferOutput<typeof Bucket>;

export const StepStat = v.object({ kind: str, step: str, count: int, median_s: v.number(), p90_s: v.number() });
export type StepStat = v.InferOutput<typeof StepStat>;

export const Series = v.object({
  range: str,
  bucket: str,
  from: str,
  to: str,
  position: int,
  buckets: v.optional(v.nullable(v.array(Bucket)), []),
  steps: v.optional(v.nullable(v.array(StepStat)), []),
});
export type Series = { range: string; bucket: string; from: string; to: string; position: number; buckets: Bucket[]; steps: StepStat[] };

const series = decoder(
  v.pipe(Series, v.transform((s): Series => ({ ...s, buckets: s.buckets ?? [], steps: s.steps ?? [] }))),
  "insights",
);

export const insightsService = {
  series: (range: string, signal?: AbortSignal) => request(`/api/insights?range=${encodeURIComponent(range)}`, series, { signal }),
};
