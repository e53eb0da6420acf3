import { FailureRaw } from "../components/FailureRaw";
import { useState } from "react";
import { useLocation } from "wouter";
import { reconcileService, type AdoptTarget, type Finding, type ReconcileReport } from "../services/reconcile";
import { atLeast } from "../auth/roles";
import { useSubject } from "../auth/session";
import { CommandError } from "../components/CommandError";
import { ConfirmPlan } from "../components/ConfirmPlan";
import { failureText, formatTime } from "../format";
import { useT } from "../i18n";
import { useLive } from "../live/store";
import { useCommand } from "../live/useCommand";
import { useLoad } from "../live/useLoad";

/**
 * useReconcileKey moves whenever a run starts or ends on the live stream
 * (their audit entries), so the page reloads the report on pushed changes,
 * never on a timer. A run's findings are appended with its end.
 */
function useReconcileKey(): number {
  return useLive((s) => {
    for (let i = s.audit.length - 1; i >= 0; i--) {
      const a = s.audit[i];
      if (a.stream === "reconcile" && (a.type === "ReconcileStarted" || a.type === "ReconcileFinished")) return a.position;
    }
    return 0;
  });
}

/** findingURL links a finding to the provider's own page, when its base URL is configured. */
export function findingURL(f: Finding, links: ReconcileReport["links"]): string | undefined {
  const [, scopeID = ""] = f.scope.split(":");
  if (f.provider === "coolify" && links?.coolify) {
    // Coolify's pages of applications and databases need the environment;
    // the project page lists them.
    const project = f.kind === "project" ? f.id : scopeID;
    return project ? `${links.coolify}/project/${encodeURIComponent(project)}` : undefined;
  }
  if (f.provider === "bitbucket" && links?.bitbucket) {
    const [key, slug] = f.kind === "repository" ? f.id.split("/") : [f.id, undefined];
    const base = `${links.bitbucket}/projects/${encodeURIComponent(key ?? "")}`;
    return slug ? `${base}/repos/${encodeURIComponent(slug)}` : base;
  }
  return undefined;
}

const findingKey = (f: Finding) => `${f.provider}|${f.kind}|${f.id}`;

/** providerName: the products' own names, the same in every language. */
function providerName(p: string): string {
  return p === "coolify" ? "Coolify" : p === "bitbucket" ? "Bitbucket" : p;
}

/** ReconcilePage lists the latest reconciliation run's findings, problems first, with the actions on them. */
export function ReconcilePage() {
  const t = useT();
  const key = useReconcileKey();
  const load = useLoad("reconcile", String(key), (signal) => reconcileService.report(signal));
  const subject = useSubject();
  const operator = atLeast(subject, "operator");
  const run = useCommand();
  const rep = load.data;
  const findings = rep?.findings ?? [];
  const problems = findings.filter((f) => f.class !== "resolved").length;
  return (
    <section aria-labelledby="recon-title" data-testid="reconcile-page">
      <h1 id="recon-title">{t("recon.title")}</h1>
      <p>{t("recon.intro")}</p>
      {load.error && <CommandError error={load.error} />}
      {load.loading && !rep && <p>{t("common.loading")}</p>}
      {rep && <RunSummary rep={rep} />}
      {operator && (
        <p>
          <button
            type="button"
            data-testid="recon-run"
            disabled={run.pending || rep?.run?.state === "running"}
            onClick={() => void run.run(() => reconcileService.run())}
          >
            {t("recon.run_now")}
          </button>
        </p>
      )}
      <CommandError error={run.error} />
      {rep?.run && findings.length === 0 && rep.run.state !== "running" && <p data-testid="recon-clean">{t("recon.clean")}</p>}
      {rep?.run && problems > 0 && <p>{t("recon.problems", { count: problems })}</p>}
      {findings.length > 0 && (
        <ul className="findings" data-testid="findings">
          {findings.map((f) => (
            <FindingRow key={findingKey(f)} f={f} rep={rep} operator={operator} />
          ))}
        </ul>
      )}
    </section>
  );
}

function RunSummary({ rep }: { rep: ReconcileReport }) {
  const t = useT();
  const r = rep.run;
  if (!r) return <p data-testid="recon-none">{t("recon.no_run")}</p>;
  return (
    <dl className="facts" data-testid="recon-run-state" data-state={r.state}>
      <dt>{t("recon.state")}</dt>
      <dd>
        <span className={`badge badge-${r.state === "done" ? "done" : r.state === "running" ? "running" : "failed"}`}>
          {t(`recon.run_${r.state}`)}
        </span>
        {/* The failure in the reader's words from its code; the server's English folded (a run recorded before the codes: only there). */}
        {(r.error || r.error_code) && (
          <>
            {" "}
            <span data-testid="recon-run-error">{t("common.error", { message: failureText({ code: r.error_code, args: r.error_args }, t) })}</span>
            <FailureRaw failure={{ code: r.error_code, raw: r.error }} />
          </>
        )}
      </dd>
      <dt>{t("recon.started")}</dt>
      <dd>{formatTime(r.started_at, t.lang)}</dd>
      {r.ended_at && (
        <>
          <dt>{t("recon.ended")}</dt>
          <dd>{formatTime(r.ended_at, t.lang)}</dd>
        </>
      )}
      <dt>{t("recon.scope")}</dt>
      <dd>{(r.scope ?? []).length > 0 ? (r.scope ?? []).join(", ") : t("common.none")}</dd>
    </dl>
  );
}

function FindingRow({ f, rep, operator }: { f: Finding; rep: ReconcileReport | undefined; operator: boolean }) {
  const t = useT();
  const url = findingURL(f, rep?.links);
  const [acting, setActing] = useState<Action | undefined>(undefined);
  return (
    <li className={`finding finding-${f.class}`} data-testid="finding" data-class={f.class} data-id={f.id}>
      <span className={`badge finding-badge-${f.class}`}>{t(`recon.class_${f.class}`)}</span>{" "}
      <strong>{t.dyn("res", f.kind)}</strong> {t("recon.at", { provider: providerName(f.provider) })}{" "}
      {url ? (
        <a href={url} target="_blank" rel="noreferrer noopener" data-testid="finding-link">
          <code>{f.id}</code>
        </a>
      ) : (
        <code>{f.id}</code>
      )}
      {f.name && <> ({f.name})</>}
      <div className="finding-meta">
        {t(`recon.explain_${f.class}`)}
        {/* Why it could not be checked, when a provider answered: in the reader's words, from its code. */}
        {f.error_code && f.class === "unknown" && (
          <span data-testid="finding-failure"> {t("recon.unknown_why", { text: failureText({ code: f.error_code, args: f.error_args, status: f.error_args?.status, target: false }, t) })}</span>
        )}
        {f.slot && <> {t("recon.slot", { slot: f.slot })}</>}
        {/* A space of its own: the sentence before it ends with a period ("…HTTP 502).since" was found on the walk). */}{" "}
        <span className="muted">{t("recon.since", { time: formatTime(f.since, t.lang) })}</span>
        {/* The reconciler's own English ("gone at Coolify", "could not check: …"): folded under the class's explanation. */}
        {f.detail && f.class !== "resolved" && <FailureRaw failure={{ raw: f.detail }} />}
      </div>
      {operator && f.class === "orphan" && f.kind !== "project" && !acting && (
        <div className="finding-actions">
          <button type="button" data-testid="adopt-open" onClick={() => setActing("adopt")}>
            {t("recon.adopt")}
          </button>
          <button type="button" className="danger" data-testid="delete-open" onClick={() => setActing("delete_orphan")}>
            {t("recon.delete")}
          </button>
        </div>
      )}
      {acting && <OrphanForm action={acting} target={{ provider: f.provider, kind: f.kind, id: f.id }} onClose={() => setActing(undefined)} />}
    </li>
  );
}

type Action = "adopt" | "delete_orphan";

/**
 * OrphanForm picks the slot that takes the orphan in (adopt) or that the
 * deletion is charged to (it tracks the orphan until the provider confirms
 * it gone), then shows the plan behind a confirmation.
 */
function OrphanForm({ action, target, onClose }: { action: Action; target: AdoptTarget; onClose: () => void }) {
  const t = useT();
  const [, navigate] = useLocation();
  const cmd = useCommand();
  const slots = useLive((s) => s.slots);
  const choices = [...slots.values()].filter((v) => v.lifecycle !== "retired").map((v) => v.name).sort();
  const [slot, setSlot] = useState("");
  const [confirm, setConfirm] = useState(false);
  const go = async () => {
    const r = await cmd.run(() => (action === "adopt" ? reconcileService.adopt(slot, target) : reconcileService.deleteOrphan(slot, target)));
    if (r) navigate(`/jobs/${encodeURIComponent(r.job_id)}`);
  };
  const load = (signal: AbortSignal) =>
    action === "adopt" ? reconcileService.planAdopt(slot, target, signal) : reconcileService.planDeleteOrphan(slot, target, signal);
  return (
    <div className="adopt" data-testid="adopt-form" data-action={action}>
      {action === "delete_orphan" && <p>{t("recon.delete_why")}</p>}
      <label>
        <span>{t(action === "adopt" ? "recon.adopt_into" : "recon.delete_charge")}</span>{" "}
        <select value={slot} onChange={(e) => setSlot(e.target.value)} data-testid="adopt-slot">
          <option value="">{t("recon.pick_slot")}</option>
          {choices.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </label>{" "}
      <button type="button" disabled={slot === ""} onClick={() => setConfirm(true)} data-testid="adopt-plan">
        {t("recon.adopt_plan")}
      </button>{" "}
      <button type="button" onClick={onClose}>
        {t("common.cancel")}
      </button>
      {!confirm && <CommandError error={cmd.error} />}
      {confirm && (
        <ConfirmPlan
          slot={slot}
          kind={action}
          loadPlan={{ key: `${action}|${slot}|${target.provider}|${target.kind}|${target.id}`, load }}
          command={cmd}
          onConfirm={() => void go()}
          onClose={() => setConfirm(false)}
        />
      )}
    </div>
  );
}
