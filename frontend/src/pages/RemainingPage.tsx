import { useMemo, useState } from "react";
import { StateBadge } from "../ui/Badge";
import { slotTone } from "../ui/tone";
import { Link } from "wouter";
import { resourcesService, type RemainingResource } from "../services/resources";
import type { SlotView } from "../services/slots";
import { CommandError } from "../components/CommandError";
import { ResourceId } from "../components/ResourceId";
import { CleanupHow } from "../components/CleanupHow";
import { cleanupOf, type Cleanup } from "../leftovers";
import { formatTime, resourceName, untouched } from "../format";
import { useT } from "../i18n";
import { useLive } from "../live/store";
import { useLoad } from "../live/useLoad";
import { TableWrap } from "../components/TableWrap";

/**
 * remainingKey changes whenever what a slot owns, or whether it is in
 * trouble, changes, so the page reloads on pushed changes (never on a
 * timer) but not on every step of a running job.
 */
function useRemainingKey(): string {
  return useLive((s) => {
    let k = "";
    for (const v of s.slots.values()) {
      k += `${v.name}:${v.lifecycle}:${v.recovery?.job_id ?? ""}:${v.resources?.length ?? 0}:${v.deleting?.length ?? 0};`;
    }
    return k;
  });
}

/** Problem is why a slot's resources need a person: its last job failed, its teardown is incomplete, or it is retired and still owns something. */
export type Problem = "failed" | "teardown_incomplete" | "retired" | "to_clean";

/** problemOf classifies a row by its slot (the live view when there is one). */
export function problemOf(r: RemainingResource, slot: SlotView | undefined): Problem | undefined {
  const lifecycle = slot?.lifecycle ?? r.lifecycle;
  if (lifecycle === "teardown_incomplete") return "teardown_incomplete";
  // One story about leftovers (issue 35 item 3): what the provider's API
  // could not delete and a person must (a Docker volume with its data) is
  // something to clean, counted here, never "no slot needs attention".
  if (r.cleanup) return "to_clean";
  if (lifecycle === "retired") return "retired";
  // A job cancelled before any step ran changed nothing: no trouble.
  const rec = slot?.recovery;
  if (rec && !untouched(rec.state, rec.completed_steps, rec.uncertain_step)) return "failed";
  return undefined;
}

/** sortProblemsFirst puts the rows of slots in trouble first, keeping the server's order within each part. */
export function sortProblemsFirst<R>(rows: readonly R[], problem: (r: R) => Problem | undefined): R[] {
  return [...rows.filter((r) => problem(r)), ...rows.filter((r) => !problem(r))];
}

/**
 * RemainingPage lists every outside resource a slot owns, the slots in
 * trouble first (failed job, teardown incomplete, retired); the healthy
 * ones can be hidden.
 */
export function RemainingPage() {
  const t = useT();
  const key = useRemainingKey();
  const slots = useLive((s) => s.slots);
  const load = useLoad("remaining", key, (signal) => resourcesService.remaining(signal));
  const [hideHealthy, setHideHealthy] = useState(false);
  const rows = useMemo(() => {
    const all = load.data?.resources ?? [];
    const tagged = all.map((r) => ({ r, problem: problemOf(r, slots.get(r.slot)) }));
    return sortProblemsFirst(tagged, (x) => x.problem);
  }, [load.data, slots]);
  const problems = rows.filter((x) => x.problem).length;
  const healthy = rows.length - problems;
  const shown = hideHealthy ? rows.filter((x) => x.problem) : rows;
  return (
    <section aria-labelledby="remaining-title" className="stack">
      <h1 id="remaining-title">{t("remaining.title")}</h1>
      {load.error && <CommandError error={load.error} />}
      {load.loading && !load.data && <p>{t("common.loading")}</p>}
      {load.data && rows.length === 0 && <p>{t("remaining.empty")}</p>}
      {load.data && (
        <p className={problems > 0 ? "state-text state-bad" : "state-text state-ok"} data-testid="remaining-summary">
          <span aria-hidden="true">{problems > 0 ? "⚠ " : "✓ "}</span>
          {problems > 0 ? t("remaining.problem_count", { count: problems }) : t("remaining.no_problems")}
        </p>
      )}
      {healthy > 0 && (
        <label className="check">
          <input type="checkbox" checked={hideHealthy} onChange={(e) => setHideHealthy(e.target.checked)} data-testid="hide-healthy" />{" "}
          {t("remaining.hide_healthy", { count: healthy })}
        </label>
      )}
      {shown.length > 0 && (
        <TableWrap label={t("remaining.title")}>
          <table data-testid="remaining-table" className="stack-on-phone">
            <thead>
              <tr>
                <th scope="col">{t("remaining.slot")}</th>
                <th scope="col">{t("remaining.state")}</th>
                <th scope="col">{t("remaining.kind")}</th>
                <th scope="col">{t("remaining.id")}</th>
                <th scope="col">{t("remaining.job")}</th>
              </tr>
            </thead>
            <tbody>
              {shown.map(({ r, problem }) => (
                <tr key={`${r.slot}:${r.resource.kind}:${r.resource.id}`} data-testid="remaining-row" data-problem={problem ?? ""} className={problem ? "row-problem" : undefined}>
                  <td data-label={t("remaining.slot")} className="nowrap">
                    <Link href={`/slots/${encodeURIComponent(r.slot)}`}>{r.slot}</Link>
                  </td>
                  <td data-label={t("remaining.state")}>
                    {problem ? (
                      <StateBadge tone="attention">{t(`remaining.problem.${problem}`)}</StateBadge>
                    ) : (
                      <StateBadge tone={slotTone(r.lifecycle)}>{t.dyn("lifecycle", r.lifecycle)}</StateBadge>
                    )}
                  </td>
                  <td data-label={t("remaining.kind")}>{t.dyn("res", r.resource.kind)}</td>
                  <td data-label={t("remaining.id")}>
                    <ResourceId r={r.resource} project={slots.get(r.slot)?.project_uuid} />
                    {r.resource.name && r.resource.name !== r.resource.id ? <span className="muted"> {resourceName(r.resource, t)}</span> : null}
                    {r.cleanup && (
                      // Worded from the code; the command alone is offered to copy (issue 35).
                      <RowCleanup r={r} />
                    )}
                    {r.delete_accepted_at && (
                      <>
                        {" "}
                        <span className="badge state-warn" data-testid="deleting">
                          {t("slot.deleting", { time: formatTime(r.delete_accepted_at, t.lang) })}
                        </span>
                      </>
                    )}
                  </td>
                  <td data-label={t("remaining.job")}>{r.job_id ? <Link href={`/jobs/${encodeURIComponent(r.job_id)}`}>{t("common.view_timeline")}</Link> : ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}

/**
 * RowCleanup words a row's clean-up from the server's code, or, from a
 * server without codes, from the resource as the slot page does; the
 * server's English only when neither knows it.
 */
function RowCleanup({ r }: { r: RemainingResource }) {
  const code = r.cleanup_code;
  const coded: Cleanup | undefined =
    code === "docker_volume_rm" || code === "bind_mount_rm" || code === "unreachable_rm" ? { code, command: r.cleanup_command || undefined } : cleanupOf(r.resource);
  if (coded) return <CleanupHow cleanup={coded} id={r.resource.id} />;
  return (
    <div className="cleanup" data-testid="cleanup">
      <span className="small">{r.cleanup}</span>
    </div>
  );
}
