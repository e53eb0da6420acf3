// The Simulator page's pull requests (issue 34 item 6): open one in the
// simulated Bitbucket (POST /api/sim/pull-requests), and merge, decline or
// push to it; each answer is the delivery Bitbucket would send, which the
// server signs with its own webhook secret and receives
// (POST /api/hooks/bitbucket/simulated). The browser never holds the
// secret. The person then watches the pull request take a slot.
import { useState, type FormEvent } from "react";
import { CommandError } from "../components/CommandError";
import { naturalCompare } from "../format";
import { useT } from "../i18n";
import { announce } from "../live/announce";
import { useSlots } from "../live/store";
import { useCommand } from "../live/useCommand";
import { prService, repoName, type Outcome, type SimDelivery } from "../services/pullrequests";
import type { RepoRef } from "../services/resources";
import { StateBadge } from "../ui/Badge";
import { deliveryReason, resultText, resultTone } from "./AdminPullRequests";

/** OpenPR is a pull request the page knows to be open: on a slot, or opened here and waiting. */
interface OpenPR {
  repo: RepoRef;
  id: number;
  title?: string;
  slot?: string;
}

const key = (r: RepoRef, id: number) => `${repoName(r)}#${id}`;

export function SimPullRequests() {
  const t = useT();
  const cmd = useCommand();
  const slots = useSlots();
  const [project, setProject] = useState("DEMO");
  const [repo, setRepo] = useState("webshop");
  const [branch, setBranch] = useState("feature/checkout");
  // From a fork: the fork's project (~user for a personal fork); "" for a branch of the repository itself.
  const [fork, setFork] = useState("");
  // Opened from this page and not closed: shown until they are on a slot (or waiting).
  const [opened, setOpened] = useState<OpenPR[]>([]);
  const [last, setLast] = useState<{ text: string; outcome: Outcome } | undefined>(undefined);

  const onSlots: OpenPR[] = [...slots.values()]
    .filter((s) => s.pull_request)
    .sort((a, b) => naturalCompare(a.name, b.name))
    .map((s) => ({ repo: s.pull_request!.repo, id: s.pull_request!.id, title: s.pull_request!.title, slot: s.name }));
  const seen = new Set(onSlots.map((p) => key(p.repo, p.id)));
  const open = [...onSlots, ...opened.filter((p) => !seen.has(key(p.repo, p.id)))];

  const told = (d: SimDelivery, r: RepoRef, outcome: Outcome) => {
    const text = t("prsim.delivered", { event: d.event_key, repo: repoName(r), id: d.id, result: resultText(outcome.result, t) });
    setLast({ text, outcome });
    announce(text);
  };
  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const res = await cmd.run(() => prService.open(project.trim(), repo.trim(), branch.trim(), fork.trim()));
    if (!res) return;
    const r = { project: project.trim().toUpperCase(), slug: repo.trim() };
    told(res.delivery, r, res.outcome);
    if (res.outcome.result === "accepted") setOpened((l) => [...l, { repo: r, id: res.delivery.id }]);
  };
  const close = async (p: OpenPR, how: "merge" | "decline") => {
    const res = await cmd.run(() => prService.close(p.repo, p.id, how));
    if (!res) return;
    told(res.delivery, p.repo, res.outcome);
    setOpened((l) => l.filter((x) => key(x.repo, x.id) !== key(p.repo, p.id)));
  };
  const push = async (p: OpenPR) => {
    const res = await cmd.run(() => prService.push(p.repo, p.id));
    if (res) told(res.delivery, p.repo, res.outcome);
  };
  return (
    <section aria-labelledby="prsim-title" data-testid="sim-prs">
      <h2 id="prsim-title">{t("prsim.title")}</h2>
      <p>{t("prsim.intro")}</p>
      <form className="admin-form" onSubmit={(e) => void submit(e)}>
        <label>
          {t("prsim.project")}
          <input required value={project} onChange={(e) => setProject(e.target.value)} autoComplete="off" data-testid="prsim-project" />
        </label>
        <label>
          {t("prsim.repo")}
          <input required value={repo} onChange={(e) => setRepo(e.target.value)} autoComplete="off" data-testid="prsim-repo" />
        </label>
        <label>
          {t("prsim.branch")}
          <input required value={branch} onChange={(e) => setBranch(e.target.value)} autoComplete="off" data-testid="prsim-branch" />
        </label>
        <label>
          {t("prsim.fork")}
          <input value={fork} onChange={(e) => setFork(e.target.value)} placeholder="~dana" autoComplete="off" data-testid="prsim-fork" />
        </label>
        <button type="submit" className="primary" disabled={cmd.pending} data-testid="prsim-open">
          {t("prsim.open")}
        </button>
      </form>
      <CommandError error={cmd.error} />
      {last && (
        <p role="status" data-testid="prsim-outcome" data-result={last.outcome.result} data-code={last.outcome.reason_code}>
          <StateBadge tone={resultTone(last.outcome.result)}>{resultText(last.outcome.result, t)}</StateBadge> {last.text}
          {last.outcome.reason_code === "repo_unlinked" ? (
            <> — {t("prsim.unlinked", { repo: last.outcome.reason_args?.repo ?? "" })}</>
          ) : (
            (last.outcome.reason_code || last.outcome.reason) && <> — {deliveryReason(last.outcome, t)}</>
          )}
        </p>
      )}
      <h3>{t("prsim.open_prs")}</h3>
      {open.length === 0 && <p data-testid="prsim-none">{t("prsim.none")}</p>}
      <ul data-testid="prsim-list">
        {open.map((p) => {
          const name = key(p.repo, p.id);
          return (
            <li key={name} data-testid="prsim-pr" data-pr={name} data-slot={p.slot}>
              <code>{name}</code> {p.title ?? ""} ·{" "}
              {p.slot ? <a href={`#/slots/${encodeURIComponent(p.slot)}`}>{t("prsim.on_slot", { slot: p.slot })}</a> : <span className="muted">{t("prsim.waiting")}</span>}{" "}
              <span className="actions">
                <button type="button" disabled={cmd.pending} onClick={() => void push(p)} aria-label={t("prsim.push_label", { repo: repoName(p.repo), id: p.id })} data-testid="prsim-push">
                  {t("prsim.push")}
                </button>
                <button type="button" className="primary" disabled={cmd.pending} onClick={() => void close(p, "merge")} aria-label={t("prsim.merge_label", { repo: repoName(p.repo), id: p.id })} data-testid="prsim-merge">
                  {t("prsim.merge")}
                </button>
                <button type="button" className="danger" disabled={cmd.pending} onClick={() => void close(p, "decline")} aria-label={t("prsim.decline_label", { repo: repoName(p.repo), id: p.id })} data-testid="prsim-decline">
                  {t("prsim.decline")}
                </button>
              </span>
            </li>
          );
        })}
      </ul>
    </section>
  );
}
