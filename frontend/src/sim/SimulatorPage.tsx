// The Simulator page (issue 27 item 12): the demo's fault injection without
// curl. It drives the simulators' own control API (backend/providers/sim
// control.go, mounted under /api/sim/ only when the simulators run; GET is
// read, POST/DELETE need the admin's sim.control permission), so a
// newcomer can inject a fault, watch a job fail honestly and resume it.
import { useState } from "react";
import { CommandError } from "../components/CommandError";
import { useT } from "../i18n";
import { announce } from "../live/announce";
import { useCommand } from "../live/useCommand";
import { useLoad } from "../live/useLoad";
import { simService, type SimFault } from "../services/sim";
import type { SlotView } from "../services/slots";
import { useSlots } from "../live/store";
import { naturalCompare } from "../format";
import { SimPullRequests } from "../pullrequests/SimPullRequests";

/**
 * ENDPOINTS are the simulators' route names (backend/providers/sim/sim.go,
 * inventory.go), grouped by the job step that calls them, so a person
 * picks "the reset's volume delete" rather than an identifier.
 */
export const ENDPOINTS: readonly { endpoint: string; step: string }[] = [
  { endpoint: "coolify.DeleteDatabase", step: "delete_db" },
  { endpoint: "coolify.ListEnvs", step: "delete_env_vars" },
  { endpoint: "coolify.DeleteEnv", step: "delete_env_vars" },
  { endpoint: "coolify.ListStorages", step: "delete_volumes" },
  { endpoint: "coolify.DeleteStorage", step: "delete_volumes" },
  { endpoint: "git.ReceivePack", step: "force_push_template" },
  { endpoint: "coolify.DeleteApplication", step: "delete_app" },
  { endpoint: "bitbucket.DeleteRepo", step: "delete_repo" },
  { endpoint: "coolify.DeleteProject", step: "delete_project" },
  { endpoint: "bitbucket.GetRepo", step: "lookup_repo" },
  { endpoint: "bitbucket.CreateRepo", step: "create_repo" },
];

type Effect = "403" | "404" | "500" | "503" | "hang" | "latency" | "reset";
const EFFECTS: readonly Effect[] = ["403", "500", "503", "404", "hang", "latency", "reset"];


/**
 * slotResources are the ids a slot's provider calls name (the simulators'
 * request resource: a Coolify uuid, "PROJECT/slug" for Bitbucket and git),
 * so a fault aimed at the slot hits its jobs and no other slot's.
 */
export function slotResources(s: SlotView): string[] {
  return [s.app_uuid, s.db_uuid, s.project_uuid, `${s.repo.project}/${s.repo.slug}`].filter((x) => x !== "" && x !== "/");
}

/** Target: whose calls the fault hits — anyone's, one slot's, or one job's. */
export type Target = { kind: "any" } | { kind: "slot"; slot: SlotView } | { kind: "job"; job: string };

export function faultBody(endpoint: string, effect: Effect, times: number, target: Target = { kind: "any" }): Omit<SimFault, "id"> & { latency_ms?: number } {
  const aim = target.kind === "slot" ? { resources: slotResources(target.slot) } : target.kind === "job" ? { job: target.job } : {};
  const base = { endpoint, times, ...aim };
  switch (effect) {
    case "hang":
      return { ...base, hang: true };
    case "latency":
      return { ...base, latency_ms: 2000 };
    case "reset":
      return { ...base, reset: true };
    default:
      return { ...base, status: Number(effect) };
  }
}

export function SimulatorPage() {
  const t = useT();
  const [n, setN] = useState(0);
  const faults = useLoad("sim-faults", String(n), (signal) => simService.faults(signal));
  const cmd = useCommand();
  const [endpoint, setEndpoint] = useState(ENDPOINTS[4]?.endpoint ?? "");
  const [effect, setEffect] = useState<Effect>("403");
  const [times, setTimes] = useState(1);
  // Aimed at a slot by default (issue 35 item 4): in the demo, deadline
  // resets of other slots took a fault meant for the slot being tried.
  const slots = useSlots();
  const names = [...slots.keys()].sort(naturalCompare);
  const [chosen, setAim] = useState<string>("");
  // Until one is chosen: the first occupied slot, the one the recipe releases.
  const firstTaken = names.find((n) => slots.get(n)?.lifecycle === "occupied");
  const aim = chosen || (firstTaken ? `slot:${firstTaken}` : "any");
  const [jobId, setJobId] = useState("");
  const aimSlot = aim.startsWith("slot:") ? slots.get(aim.slice(5)) : undefined;
  const target: Target = aim === "job" && jobId.trim() ? { kind: "job", job: jobId.trim() } : aimSlot ? { kind: "slot", slot: aimSlot } : { kind: "any" };
  const stepOf = (e: string | undefined) => ENDPOINTS.find((x) => x.endpoint === e)?.step;
  const slotOf = (ids: readonly string[]) => [...slots.values()].find((s) => slotResources(s).some((id) => ids.includes(id)))?.name ?? ids[0] ?? "";
  const describe = (f: SimFault): string => {
    const what = f.hang
      ? t("sim.effect.hang")
      : f.reset
        ? t("sim.effect.reset")
        : f.status
          ? t("sim.effect.status", { status: f.status })
          : f.latency
            ? t("sim.effect.latency")
            : t("sim.effect.other");
    const step = stepOf(f.endpoint);
    const aimed = f.job ? ` · ${t("sim.aimed_job", { job: f.job })}` : f.resources?.length ? ` · ${t("sim.aimed_slot", { slot: slotOf(f.resources) })}` : ` · ${t("sim.aim_any")}`;
    return `${what} · ${f.endpoint ?? f.path_pattern ?? ""}${step ? ` (${t.dyn("step", step)})` : ""}${aimed} · ${f.times ? t("sim.times_left", { n: f.times }) : t("sim.until_cleared")}`;
  };
  if (faults.error?.notFound) {
    return (
      <section aria-labelledby="sim-title" data-testid="sim-page" data-available="false">
        <h1 id="sim-title">{t("sim.title")}</h1>
        <p role="alert">{t("sim.not_running")}</p>
      </section>
    );
  }
  const list = faults.data?.faults ?? [];
  return (
    <section aria-labelledby="sim-title" data-testid="sim-page" data-available="true">
      <h1 id="sim-title">{t("sim.title")}</h1>
      <p>{t("sim.intro")}</p>
      <ol className="small">
        <li>{t("sim.how1")}</li>
        <li>{t("sim.how2")}</li>
        <li>{t("sim.how3")}</li>
      </ol>
      <h2>{t("sim.inject")}</h2>
      <form
        className="admin-form"
        onSubmit={(e) => {
          e.preventDefault();
          void cmd.run(() => simService.add(faultBody(endpoint, effect, times, target))).then((r) => {
            if (!r) return;
            announce(t("sim.injected"));
            setN((x) => x + 1);
          });
        }}
      >
        <label>
          {t("sim.endpoint")}
          <select value={endpoint} onChange={(e) => setEndpoint(e.target.value)} data-testid="sim-endpoint">
            {ENDPOINTS.map((x) => (
              <option key={x.endpoint} value={x.endpoint}>
                {t.dyn("step", x.step)} — {x.endpoint}
              </option>
            ))}
          </select>
        </label>
        <label>
          {t("sim.effect")}
          <select value={effect} onChange={(e) => setEffect(e.target.value as Effect)} data-testid="sim-effect">
            {EFFECTS.map((x) => (
              <option key={x} value={x}>
                {x === "hang" ? t("sim.effect.hang") : x === "latency" ? t("sim.effect.latency") : x === "reset" ? t("sim.effect.reset") : t("sim.effect.status", { status: x })}
              </option>
            ))}
          </select>
        </label>
        <label>
          {t("sim.aim")}
          <select value={aim} onChange={(e) => setAim(e.target.value)} data-testid="sim-aim">
            <option value="any">{t("sim.aim_any")}</option>
            {names.map((n) => (
              <option key={n} value={`slot:${n}`}>
                {t("sim.aim_slot", { slot: n })}
              </option>
            ))}
            <option value="job">{t("sim.aim_job")}</option>
          </select>
        </label>
        {aim === "job" && (
          <label>
            {t("sim.job_id")}
            <input value={jobId} onChange={(e) => setJobId(e.target.value)} data-testid="sim-job" required />
          </label>
        )}
        <label>
          {t("sim.times")}
          <input type="number" min={0} max={100} value={times} onChange={(e) => setTimes(Math.max(0, Number(e.target.value) || 0))} data-testid="sim-times" />
          <span className="small">{t("sim.times_hint")}</span>
        </label>
        <button type="submit" className="primary" disabled={cmd.pending} data-testid="sim-inject">
          {t("sim.inject_button")}
        </button>
      </form>
      <CommandError error={cmd.error} />
      <h2>{t("sim.active")}</h2>
      <div className="actions">
        <button type="button" onClick={() => setN((x) => x + 1)} data-testid="sim-refresh">
          {t("sim.refresh")}
        </button>
        {list.length > 0 && (
          <button
            type="button"
            className="danger"
            disabled={cmd.pending}
            onClick={() =>
              void cmd.run(() => simService.clearAll().then(() => true)).then((ok) => {
                if (ok) setN((x) => x + 1);
              })
            }
            data-testid="sim-clear-all"
          >
            {t("sim.clear_all")}
          </button>
        )}
      </div>
      {faults.data && list.length === 0 && <p data-testid="sim-none">{t("sim.none")}</p>}
      <ul data-testid="sim-faults">
        {list.map((f) => (
          <li key={f.id} data-testid="sim-fault" data-endpoint={f.endpoint}>
            {describe(f)}{" "}
            <button
              type="button"
              disabled={cmd.pending}
              onClick={() =>
                void cmd.run(() => simService.clear(f.id).then(() => true)).then((ok) => {
                  if (ok) setN((x) => x + 1);
                })
              }
              aria-label={t("sim.clear_one", { what: describe(f) })}
              data-testid="sim-clear"
            >
              {t("sim.clear")}
            </button>
          </li>
        ))}
      </ul>
      <SimPullRequests />
    </section>
  );
}
