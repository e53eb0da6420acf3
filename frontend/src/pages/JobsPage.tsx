import { actorName } from "../format";
import { StateBadge } from "../ui/Badge";
import { jobTone } from "../ui/tone";
import { createContext, useContext, useMemo, useState, type FormEvent } from "react";
import { apiErrorText } from "../format";
import { ApiError } from "../services/http";
import { jobActions } from "../auth/roles";
import { useSubject } from "../auth/session";
import { useHashQuery, writeHashQuery } from "../live/hashQuery";
import { announce } from "../live/announce";
import { Checkbox } from "../ui/Checkbox";
import { Link } from "wouter";
import { JOB_KINDS, JOB_STATES, jobsService, type JobView, type JobsFilter } from "../services/jobs";
import { CommandError } from "../components/CommandError";
import { jobTitle } from "../components/jobText";
import { useT } from "../i18n";
import { useEpoch, useLive } from "../live/store";
import { useNow } from "../live/ticker";
import { useLoad } from "../live/useLoad";
import { When } from "../components/When";

/**
 * JobsPage lists every job across slots, newest first, filtered by state
 * (including "uncertain"), kind, slot and person — so a failed job is found
 * without knowing its slot. Pages are fetched with the server's cursor;
 * rows show the newest view of each job the stream has pushed since.
 */
export function JobsPage() {
  const t = useT();
  // The filters live in the address (#/jobs?state=failed&kind=reset), so a
  // filtered list is a link to keep or share (issue 35, as in River UI and
  // Temporal); the form's text fields are drafts until applied.
  const query = useHashQuery();
  const filter = useMemo(() => filterFromQuery(query), [query]);
  const setFilter = (f: JobsFilter): void => writeHashQuery({ state: f.state ?? "", kind: f.kind ?? "", slot: f.slot ?? "", actor: f.actor ?? "" });
  const [draftFor, setDraftFor] = useState<{ query: string; slot: string; actor: string }>({ query, slot: filter.slot ?? "", actor: filter.actor ?? "" });
  const draft = draftFor.query === query ? draftFor : { query, slot: filter.slot ?? "", actor: filter.actor ?? "" };
  const setSlot = (v: string) => setDraftFor({ ...draft, slot: v });
  const setActor = (v: string) => setDraftFor({ ...draft, actor: v });
  const slot = draft.slot;
  const actor = draft.actor;
  const apply = (e: FormEvent): void => {
    e.preventDefault();
    setFilter({ ...filter, slot: slot.trim(), actor: actor.trim() });
  };
  const clear = (): void => {
    setDraftFor({ query: "", slot: "", actor: "" });
    setFilter({});
  };
  const key = JSON.stringify(filter);
  const sel = useSelection(key);
  return (
    <section aria-labelledby="jobs-title" data-testid="jobs-page">
      <div className="page-head">
        <h1 id="jobs-title">{t("jobs.title")}</h1>
        <span className="muted">{t("jobs.intro")}</span>
      </div>
      <form className="jobs-filters" aria-label={t("jobs.filters")} onSubmit={apply}>
        <label>
          <span>{t("jobs.state")}</span>
          <select value={filter.state ?? ""} onChange={(e) => setFilter({ ...filter, state: e.target.value })} data-testid="jobs-state">
            <option value="">{t("jobs.any")}</option>
            {JOB_STATES.map((s) => (
              <option key={s} value={s}>
                {t.dyn("state", s)}
              </option>
            ))}
            <option value="uncertain">{t("jobs.state_uncertain")}</option>
          </select>
        </label>
        <label>
          <span>{t("jobs.kind")}</span>
          <select value={filter.kind ?? ""} onChange={(e) => setFilter({ ...filter, kind: e.target.value })} data-testid="jobs-kind">
            <option value="">{t("jobs.any")}</option>
            {JOB_KINDS.map((k) => (
              <option key={k} value={k}>
                {t.dyn("kind", k)}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>{t("jobs.slot")}</span>
          <input value={slot} onChange={(e) => setSlot(e.target.value)} data-testid="jobs-slot" />
        </label>
        <label>
          <span>{t("jobs.actor")}</span>
          <input value={actor} onChange={(e) => setActor(e.target.value)} data-testid="jobs-actor" />
        </label>
        <button type="submit" data-testid="jobs-apply">
          {t("jobs.apply")}
        </button>
        <button type="button" onClick={clear}>
          {t("jobs.clear")}
        </button>
      </form>
      <BulkBar sel={sel} />
      <SelectionCtx.Provider value={sel}>
      <div className="table-wrap">
        <table className="stack-on-phone jobs-table" data-testid="jobs-table">
          <thead>
            <tr>
              <th scope="col">
                <span className="sr-only">{t("jobs.col_select")}</span>
              </th>
              <th scope="col">{t("jobs.col_job")}</th>
              <th scope="col">{t("jobs.col_state")}</th>
              <th scope="col">{t("jobs.col_who")}</th>
              <th scope="col">{t("jobs.col_queued")}</th>
              <th scope="col">{t("jobs.col_steps")}</th>
            </tr>
          </thead>
          <JobsChunk key={key} filter={filter} />
        </table>
      </div>
      </SelectionCtx.Provider>
    </section>
  );
}

/** JobsChunk is one page of the list; its "older" button mounts the next page after it. */
function JobsChunk({ filter, cursor }: { filter: JobsFilter; cursor?: string }) {
  const t = useT();
  const epoch = useEpoch();
  const [more, setMore] = useState(false);
  const page = useLoad(`jobs-list`, `${JSON.stringify(filter)}:${cursor ?? ""}:${epoch}`, (signal) => jobsService.list(filter, cursor, signal));
  const jobs = page.data?.jobs ?? [];
  return (
    <>
      <tbody data-testid="jobs-rows">
        {page.error && (
          <tr>
            <td colSpan={6}>
              <CommandError error={page.error} />
            </td>
          </tr>
        )}
        {page.loading && !page.data && (
          <tr>
            <td colSpan={6}>{t("common.loading")}</td>
          </tr>
        )}
        {page.data && jobs.length === 0 && cursor === undefined && (
          <tr>
            <td colSpan={6} data-testid="jobs-none">
              {t("jobs.none")}
            </td>
          </tr>
        )}
        {jobs.map((j) => (
          <JobRow key={j.id} fetched={j} />
        ))}
        {page.data?.next_cursor && !more && (
          <tr>
            <td colSpan={6}>
              <button type="button" onClick={() => setMore(true)} data-testid="jobs-more">
                {t("jobs.more")}
              </button>
            </td>
          </tr>
        )}
      </tbody>
      {more && page.data?.next_cursor && <JobsChunk filter={filter} cursor={page.data.next_cursor} />}
    </>
  );
}

/** JobRow shows the newer of the fetched view and the one the stream pushed since. */
function JobRow({ fetched }: { fetched: JobView }) {
  const t = useT();
  const pushed = useLive((s) => s.jobs.get(fetched.id));
  const j = pushed && pushed.position > fetched.position ? pushed : fetched;
  const sel = useContext(SelectionCtx);
  const now = useNow();
  const done = (j.steps ?? []).filter((s) => s.state === "done").length;
  return (
    <tr data-testid="jobs-row" data-job={j.id} data-state={j.state} className={sel.has(j.id) ? "row-selected" : undefined}>
      <td data-label={t("jobs.col_select")} className="select-cell">
        {sel.selectable(j) && <Checkbox checked={sel.has(j.id)} onChange={(on) => sel.toggle(j, on)} label={t("jobs.select_job", { job: jobTitle(j, now, t) })} testId="jobs-select" />}
      </td>
      <td data-label={t("jobs.col_job")}>
        <Link href={`/jobs/${encodeURIComponent(j.id)}`}>{jobTitle(j, now, t)}</Link>
      </td>
      <td data-label={t("jobs.col_state")}>
        <StateBadge tone={jobTone(j.state)}>{t.dyn("state", j.state)}</StateBadge>
        {j.uncertain_step && (
          <>
            {" "}
            <StateBadge tone="attention">{t("jobs.state_uncertain")}</StateBadge>
          </>
        )}
      </td>
      <td data-label={t("jobs.col_who")}>{actorName(j.requested_by, t)}</td>
      <td data-label={t("jobs.col_queued")}>
        <When iso={j.queued_at} />
      </td>
      <td data-label={t("jobs.col_steps")}>{t("jobs.steps_done", { done, total: (j.steps ?? []).length })}</td>
    </tr>
  );
}

/** filterFromQuery reads the list's filters from the hash route's query; unknown values are ignored. */
export function filterFromQuery(query: string): JobsFilter {
  const q = new URLSearchParams(query);
  const state = q.get("state") ?? "";
  const kind = q.get("kind") ?? "";
  return {
    state: (JOB_STATES as readonly string[]).includes(state) || state === "uncertain" ? state : undefined,
    kind: (JOB_KINDS as readonly string[]).includes(kind) ? kind : undefined,
    slot: q.get("slot") ?? undefined,
    actor: q.get("actor") ?? undefined,
  };
}

/** Selection: the jobs ticked for a bulk resume or cancel (kept per filter: a new filter starts empty). */
interface Selection {
  jobs: ReadonlyMap<string, JobView>;
  has: (id: string) => boolean;
  toggle: (j: JobView, on: boolean) => void;
  clear: () => void;
  /** selectable: the role may resume or cancel it and the job can be (a bulk action offers only what can succeed). */
  selectable: (j: JobView) => boolean;
}

const SelectionCtx = createContext<Selection>({ jobs: new Map(), has: () => false, toggle: () => {}, clear: () => {}, selectable: () => false });

function useSelection(key: string): Selection {
  const may = jobActions(useSubject());
  const [state, setState] = useState<{ key: string; jobs: ReadonlyMap<string, JobView> }>({ key, jobs: new Map() });
  const jobs = state.key === key ? state.jobs : new Map<string, JobView>();
  return {
    jobs,
    has: (id) => jobs.has(id),
    toggle: (j, on) => {
      const next = new Map(jobs);
      if (on) next.set(j.id, j);
      else next.delete(j.id);
      setState({ key, jobs: next });
    },
    clear: () => setState({ key, jobs: new Map() }),
    selectable: (j) => (may.resume && j.resumable) || (may.cancel && j.cancellable),
  };
}

/**
 * BulkBar acts on the ticked jobs at once, as River UI's and Temporal's
 * lists do: Resume the resumable ones, Cancel the cancellable ones, one
 * request each, and says how many went through and why any did not.
 */
function BulkBar({ sel }: { sel: Selection }) {
  const t = useT();
  const may = jobActions(useSubject());
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ done: number; failed: string[]; verb: "resume" | "cancel" } | undefined>();
  const all = [...sel.jobs.values()];
  const resumable = may.resume ? all.filter((j) => j.resumable) : [];
  const cancellable = may.cancel ? all.filter((j) => j.cancellable) : [];
  const run = async (verb: "resume" | "cancel", jobs: JobView[]) => {
    setBusy(true);
    let done = 0;
    const failed: string[] = [];
    for (const j of jobs) {
      try {
        await (verb === "resume" ? jobsService.resume(j.id) : jobsService.cancel(j.id));
        done++;
      } catch (e) {
        failed.push(`${j.slot}: ${e instanceof ApiError ? apiErrorText(e, t) : String(e)}`);
      }
    }
    setBusy(false);
    sel.clear();
    setResult({ done, failed, verb });
    announce(t(verb === "resume" ? "jobs.bulk_resumed" : "jobs.bulk_cancelled", { count: done }));
  };
  return (
    <div className="bulk-bar" data-testid="jobs-bulk" role="region" aria-label={t("jobs.bulk")}>
      {all.length > 0 ? (
        <>
          <strong>{t("jobs.selected", { count: all.length })}</strong>
          <button type="button" className="primary" disabled={busy || resumable.length === 0} onClick={() => void run("resume", resumable)} data-testid="jobs-bulk-resume">
            {t("jobs.bulk_resume", { count: resumable.length })}
          </button>
          <button type="button" className="danger" disabled={busy || cancellable.length === 0} onClick={() => void run("cancel", cancellable)} data-testid="jobs-bulk-cancel">
            {t("jobs.bulk_cancel", { count: cancellable.length })}
          </button>
          <button type="button" className="link" onClick={sel.clear}>
            {t("jobs.bulk_clear")}
          </button>
        </>
      ) : (
        <span className="muted small">{t("jobs.bulk_hint")}</span>
      )}
      {result && (
        <p role="status" className={result.failed.length > 0 ? "recovery" : "notice"} data-testid="jobs-bulk-result">
          {t(result.verb === "resume" ? "jobs.bulk_resumed" : "jobs.bulk_cancelled", { count: result.done })}
          {result.failed.map((f) => (
            <span key={f} className="small">
              <br />
              {f}
            </span>
          ))}
        </p>
      )}
    </div>
  );
}
