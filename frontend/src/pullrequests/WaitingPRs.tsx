// The pull requests waiting for a slot (issue 34), on the board where a
// pool operator looks first: in the order they will be served (the
// driver's queue: oldest wait first), with how long each has waited, live.
import { useMemo } from "react";
import { formatDuration, formatTime } from "../format";
import { useT } from "../i18n";
import { useTicking } from "../live/ticker";
import { repoName, waitingPRs, type PRView } from "../services/pullrequests";
import { usePullRequests } from "./usePullRequests";

/** WaitingPRs lists the waiting pull requests; nothing while none waits. */
export function WaitingPRs() {
  const t = useT();
  const prs = usePullRequests("board-pull-requests");
  const waiting = useMemo(() => waitingPRs(prs.values()), [prs]);
  if (waiting.length === 0) return null;
  return (
    <section className="pr-waiting notice" aria-labelledby="pr-waiting-title" data-testid="pr-waiting">
      <h2 id="pr-waiting-title">{t("pr.waiting_title", { count: waiting.length })}</h2>
      <p className="muted small">{t("pr.waiting_intro")}</p>
      <ol>
        {waiting.map((p) => (
          <WaitingPR key={p.stream} pr={p} />
        ))}
      </ol>
    </section>
  );
}

function WaitingPR({ pr }: { pr: PRView }) {
  const t = useT();
  const name = `${repoName(pr.repo)}#${pr.id}`;
  const since = pr.waiting_since ?? pr.opened_at;
  const age = useTicking((now) => formatDuration(now - Date.parse(since), t));
  const href = pr.link && /^https?:\/\//i.test(pr.link) ? pr.link : undefined;
  const title = pr.title || t("pr.untitled");
  return (
    <li data-testid="pr-waiting-item" data-pr={name}>
      {href ? (
        <a href={href} target="_blank" rel="noopener noreferrer" title={t("pr.open_link_label", { repo: repoName(pr.repo), id: pr.id })}>
          <span className="pr-name">{name}</span> {title}
        </a>
      ) : (
        <span>
          <span className="pr-name">{name}</span> {title}
        </span>
      )}{" "}
      <span className="muted small">
        {pr.author && <>{t("pr.by", { author: pr.author })} · </>}
        {pr.branch} ·{" "}
        <time dateTime={since} title={formatTime(since, t.lang, { seconds: true })} data-testid="pr-waiting-age">
          {t("pr.waiting_for", { age })}
        </time>
      </span>
    </li>
  );
}
