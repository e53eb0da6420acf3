// The simulators' control API (backend/providers/sim/control.go, mounted
// under /api/sim/ only when the simulators run): the Simulator page's faults.
import * as v from "valibot";
import { nothing, request } from "./http";
import { decoder, int, list, optStr } from "./wire";

/** SimFault mirrors sim.Fault's JSON (backend/providers/sim/faults.go). */
export const SimFault = v.object({
  id: int,
  server: optStr,
  method: optStr,
  endpoint: optStr,
  path_pattern: optStr,
  resource: optStr,
  /** Any of these resource ids: a fault aimed at one slot (issue 35 item 4). */
  resources: v.optional(v.nullable(v.array(v.string()))),
  /** Only the calls of this job (its X-Slotkeeper-Job). */
  job: optStr,
  status: v.optional(int),
  latency: v.optional(v.number()),
  hang: v.optional(v.boolean()),
  reset: v.optional(v.boolean()),
  foreign_404: v.optional(v.boolean()),
  times: v.optional(int),
  skip: v.optional(int),
});
export type SimFault = v.InferOutput<typeof SimFault>;

const faults = decoder(v.object({ faults: list(SimFault) }), "fault list");
const added = decoder(v.object({ id: int }), "added fault");

export const simService = {
  faults: (signal?: AbortSignal) => request("/api/sim/faults", faults, { signal }),
  add: (f: Omit<SimFault, "id"> & { latency_ms?: number }) => request("/api/sim/faults", added, { method: "POST", body: f }),
  clear: (id: number) => request(`/api/sim/faults/${id}`, nothing, { method: "DELETE" }),
  clearAll: () => request("/api/sim/faults", nothing, { method: "DELETE" }),
};
