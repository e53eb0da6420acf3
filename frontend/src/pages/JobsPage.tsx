import { actorName } from "../format";
import { StateBadge } from "../ui/Badge";
import { jobTone } from "../ui/tone";
import { useState, type FormEvent } from "react";
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
  const [filter, setFilter] = useState<JobsFilter>({});
  const [slot, setSlot] = useState("");
  const [actor, setActor] = useState("");
  const apply = (e: FormEvent): void => {
    e.preventDefault();
    setFilter({ ...filter, slot: slot.trim(), actor: actor.trim() });
  };
  const clear = (): void => {
    setSlot("");
    setActor("");
    setFilter({});
  };
  const key = JSON.stringify(filter);
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
      <div className="table-wrap">
        <table className="stack-on-phone jobs-table" data-testid="jobs-table">
          <thead>
            <tr>
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
            <td colSpan={5}>
              <CommandError error={page.error} />
            </td>
          </tr>
        )}
        {page.loading && !page.data && (
          <tr>
            <td colSpan={5}>{t("common.loading")}</td>
          </tr>
        )}
        {page.data && jobs.length === 0 && cursor === undefined && (
          <tr>
            <td colSpan={5} data-testid="jobs-none">
              {t("jobs.none")}
            </td>
          </tr>
        )}
        {jobs.map((j) => (
          <JobRow key={j.id} fetched={j} />
        ))}
        {page.data?.next_cursor && !more && (
          <tr>
            <td colSpan={5}>
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
  const now = useNow();
  const done = (j.steps ?? []).filter((s) => s.state === "done").length;
  return (
    <tr data-testid="jobs-row" data-job={j.id} data-state={j.state}>
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
