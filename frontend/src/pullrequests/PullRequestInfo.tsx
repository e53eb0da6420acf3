// A slot held by a pull request shows it (issue 34): title, author, branch,
// a link to the PR in Bitbucket and the commit the slot runs.
import { Link } from "wouter";
import { CommandError } from "../components/CommandError";
import { formatTime } from "../format";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";
import { jobsService, type JobView } from "../services/jobs";
import { repoName, type SlotPR } from "../services/pullrequests";
import type { SlotView } from "../services/slots";
import { StateBadge } from "../ui/Badge";
import { jobTone } from "../ui/tone";

/** prLink is the PR's page in Bitbucket when it is an http(s) URL (never a javascript: link). */
export function prLink(pr: SlotPR): string | undefined {
  return pr.link && /^https?:\/\//i.test(pr.link) ? pr.link : undefined;
}

/** shortSha is the first 12 characters of a commit, as the slot's deployed commit is shown. */
export const shortSha = (sha: string) => sha.slice(0, 12);

/**
 * runs says what the slot runs for its PR: the deployed commit once a
 * pr_deploy (or the reset before it) deployed one, and the head being
 * deployed while its job runs.
 */
export function prCommit(slot: SlotView): { runs?: string; deploying?: string } {
  const pr = slot.pull_request;
  if (!pr) return {};
  const runs = slot.deployed?.commit || undefined;
  const busy = slot.active_job?.kind === "pr_deploy" || (!!pr.job_id && slot.active_job?.id === pr.job_id);
  return { runs, deploying: busy && pr.head !== runs ? pr.head : undefined };
}

/** PullRequestInfo is the PR holding a slot; compact on the board's card. */
export function PullRequestInfo({ slot, compact = false }: { slot: SlotView; compact?: boolean }) {
  const t = useT();
  const pr = slot.pull_request;
  if (!pr) return null;
  const name = `${repoName(pr.repo)}#${pr.id}`;
  const href = prLink(pr);
  const { runs, deploying } = prCommit(slot);
  const title = pr.title || t("pr.untitled");
  return (
    <div className={`pr-info${compact ? " compact" : ""}`} data-testid="slot-pr" data-pr={name} aria-label={t("pr.card_label", { repo: repoName(pr.repo), id: pr.id })} role="group">
      <div className="pr-title">
        {href ? (
          <a href={href} target="_blank" rel="noopener noreferrer" data-testid="slot-pr-link" title={t("pr.open_link_label", { repo: repoName(pr.repo), id: pr.id })}>
            <span className="pr-name">{name}</span> {title}
          </a>
        ) : (
          <span>
            <span className="pr-name">{name}</span> {title}
          </span>
        )}
      </div>
      <div className="pr-meta small">
        {pr.author && (
          <span data-testid="slot-pr-author">
            <span className="muted">{t("pr.author")}: </span>
            {pr.author}
          </span>
        )}{" "}
        <span data-testid="slot-pr-branch">
          <span className="muted">{t("pr.branch")}: </span>
          <code>{pr.branch}</code>
        </span>{" "}
        <span data-testid="slot-pr-commit" data-runs={runs} data-deploying={deploying}>
          <span className="muted">{t("pr.runs")}: </span>
          {runs ? <code>{shortSha(runs)}</code> : !deploying && <span className="muted">{t("pr.not_deployed")}</span>}
          {deploying && (
            <span className="muted">
              {runs ? " · " : ""}
              {t("pr.deploying", { sha: shortSha(deploying) })}
            </span>
          )}
        </span>
      </div>
      {!compact && href && (
        <a className="button" href={href} target="_blank" rel="noopener noreferrer" data-testid="slot-pr-open">
          {t("pr.open_link")}
        </a>
      )}
    </div>
  );
}

/** PRPushes lists the slot's pr_deploy jobs (each push deployed), newest first, linking to their job pages. */
export function PRPushes({ slot }: { slot: SlotView }) {
  const t = useT();
  const page = useLoad(`prjobs:${slot.name}`, `${slot.name}:${slot.position}`, (signal) => jobsService.ofSlot(slot.name, "pr_deploy", undefined, signal));
  if (!slot.pull_request) return null;
  // This PR's pushes: the ones queued since it took the slot.
  const since = slot.occupied_at ? Date.parse(slot.occupied_at) : 0;
  const jobs: JobView[] = (page.data?.jobs ?? []).filter((j) => Date.parse(j.queued_at) >= since);
  return (
    <section aria-labelledby="pr-pushes-title" data-testid="pr-pushes">
      <h3 id="pr-pushes-title">{t("pr.pushes")}</h3>
      <p className="muted small">{t("pr.pushes_intro")}</p>
      {page.error && <CommandError error={page.error} />}
      {page.data && jobs.length === 0 && <p>{t("pr.no_pushes")}</p>}
      <ul className="joblist">
        {jobs.map((j) => (
          <li key={j.id} data-testid="pr-push" data-job={j.id} data-head={j.params?.head}>
            <Link href={`/jobs/${encodeURIComponent(j.id)}`}>
              <code>{shortSha(j.params?.head ?? "")}</code> · {t.dyn("kind", j.kind)}
            </Link>{" "}
            <StateBadge tone={jobTone(j.state)}>{t.dyn("state", j.state)}</StateBadge> <span className="muted small">{formatTime(j.queued_at, t.lang)}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
