// The administration page's pull-request part (issue 34): the repositories
// linked to the pool (GET/POST/DELETE /api/pr-repos) and the webhook
// deliveries this server received (GET /api/hooks/bitbucket/deliveries),
// newest first, each with what was made of it and why — loaded again each
// time the stream says the server recorded one (a deliveries frame).
import { useState, type FormEvent } from "react";
import { CommandError } from "../components/CommandError";
import { TableWrap } from "../components/TableWrap";
import { formatTime, known } from "../format";
import { useT, type T } from "../i18n";
import { announce } from "../live/announce";
import { useCommand } from "../live/useCommand";
import { useLoad } from "../live/useLoad";
import { useLive } from "../live/store";
import { prService, repoName, type Delivery, type Outcome } from "../services/pullrequests";
import type { RepoRef } from "../services/resources";
import { StateBadge } from "../ui/Badge";
import type { Tone } from "../ui/tone";

/** RESULT_TONE colours a delivery's result. */
const RESULT_TONE: Record<string, Tone> = { accepted: "done", duplicate: "wait", ignored: "off", refused: "attention" };

export const resultTone = (r: string): Tone => RESULT_TONE[r] ?? "wait";

/** resultText words a delivery's result. */
export function resultText(r: string, t: T): string {
  const k = `pr.result.${r}`;
  return known(k) ? t(k) : r;
}

/**
 * deliveryReason words why a delivery was refused, ignored or changed
 * nothing, from its code (pullrequests.Why*) in the reader's language; the
 * server's English only when it sent no code (an older server).
 */
export function deliveryReason(d: Pick<Outcome, "reason" | "reason_code" | "reason_args">, t: T): string {
  const key = `prwhy.${d.reason_code ?? ""}`;
  if (!d.reason_code || !known(key)) return d.reason ?? "";
  const args: Record<string, string> = { ...(d.reason_args ?? {}) };
  if (args.state !== undefined) {
    const sk = `pr.state.${args.state}`;
    args.state = known(sk) ? t(sk) : args.state;
  }
  if (args.head) args.head = args.head.slice(0, 12);
  const s = t(key, args);
  return /\{\w+\}/.test(s) ? (d.reason ?? "") : s;
}

/** AdminPullRequests: linked repositories and received deliveries. Absent when the server runs no pull-request flow. */
export function AdminPullRequests() {
  const t = useT();
  const [nonce, setNonce] = useState(0);
  const repos = useLoad("admin:pr-repos", String(nonce), (signal) => prService.repos(signal));
  // Live: each deliveries frame (and each snapshot) loads the list again.
  const told = useLive((s) => s.deliveries);
  const epoch = useLive((s) => s.epoch);
  const deliveries = useLoad("admin:pr-deliveries", `${nonce}:${told}:${epoch}`, (signal) => prService.deliveries(signal));
  const link = useCommand();
  const unlink = useCommand();
  const [repo, setRepo] = useState("");
  const [confirming, setConfirming] = useState<string | undefined>(undefined);
  if (repos.error?.notFound) return null;

  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const res = await link.run(() => prService.link(repo.trim()));
    if (!res) return;
    announce(t("pr.linked", { repo: repoName(res.repo) }));
    setRepo("");
    setNonce((x) => x + 1);
  };
  const doUnlink = async (r: RepoRef) => {
    const ok = await unlink.run(() => prService.unlink(r).then(() => true));
    if (!ok) return;
    setConfirming(undefined);
    announce(t("pr.unlinked", { repo: repoName(r) }));
    setNonce((x) => x + 1);
  };
  const list = repos.data ?? [];
  const rows: Delivery[] = deliveries.data ?? [];
  return (
    <>
      <section aria-labelledby="pr-repos-title" data-testid="admin-pr-repos">
        <h2 id="pr-repos-title">{t("pr.repos")}</h2>
        <p className="muted">{t("pr.repos_intro")}</p>
        <form className="admin-form" onSubmit={(e) => void submit(e)}>
          <label>
            <span>{t("pr.repo_field")}</span>
            <input required value={repo} onChange={(e) => setRepo(e.target.value)} placeholder="PROJECT/slug" autoComplete="off" data-testid="pr-repo" />
          </label>
          <button type="submit" className="primary" disabled={link.pending} data-testid="pr-link">
            {t("pr.link")}
          </button>
        </form>
        <CommandError error={link.error ?? unlink.error ?? repos.error} />
        {repos.data && list.length === 0 && <p data-testid="pr-no-repos">{t("pr.no_repos")}</p>}
        {list.length > 0 && (
          <ul className="pr-repos" data-testid="pr-repos">
            {list.map((r) => {
              const name = repoName(r);
              return (
                <li key={name} data-testid="pr-repo-row" data-repo={name}>
                  <code>{name}</code>{" "}
                  {confirming !== name && (
                    <button type="button" className="danger" onClick={() => setConfirming(name)} aria-label={t("pr.unlink_label", { repo: name })} data-testid="pr-unlink">
                      {t("pr.unlink")}
                    </button>
                  )}
                  {confirming === name && (
                    <span className="inline-confirm" role="group" aria-label={t("pr.unlink_confirm", { repo: name })}>
                      <span>{t("pr.unlink_confirm", { repo: name })}</span>{" "}
                      <button type="button" onClick={() => setConfirming(undefined)}>
                        {t("common.cancel")}
                      </button>{" "}
                      <button type="button" className="danger" disabled={unlink.pending} onClick={() => void doUnlink(r)} data-testid="pr-unlink-confirm">
                        {t("pr.unlink")}
                      </button>
                    </span>
                  )}
                </li>
              );
            })}
          </ul>
        )}
      </section>
      <section aria-labelledby="pr-deliveries-title" data-testid="admin-pr-deliveries">
        <h2 id="pr-deliveries-title">{t("pr.deliveries")}</h2>
        <p className="muted">{t("pr.deliveries_intro")}</p>
        <div className="actions">
          <button type="button" onClick={() => setNonce((x) => x + 1)} data-testid="pr-deliveries-refresh">
            {t("pr.refresh")}
          </button>
        </div>
        <CommandError error={deliveries.error} />
        {deliveries.data && rows.length === 0 && <p data-testid="pr-no-deliveries">{t("pr.no_deliveries")}</p>}
        {rows.length > 0 && (
          <TableWrap label={t("pr.deliveries")}>
            <table className="nowrap-cells" data-testid="pr-deliveries">
              <thead>
                <tr>
                  <th scope="col">{t("pr.col.time")}</th>
                  <th scope="col">{t("pr.col.event")}</th>
                  <th scope="col">{t("pr.col.repo")}</th>
                  <th scope="col">{t("pr.col.pr")}</th>
                  <th scope="col">{t("pr.col.result")}</th>
                  <th scope="col">{t("pr.col.why")}</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((d, i) => (
                  <tr key={`${d.request_id ?? ""}-${d.time}-${i}`} data-testid="pr-delivery" data-result={d.result} data-code={d.reason_code} data-request={d.request_id}>
                    <td>{formatTime(d.time, t.lang, { seconds: true })}</td>
                    <td>
                      <code>{d.event_key ?? ""}</code>
                    </td>
                    <td>{d.repo ? <code>{d.repo}</code> : ""}</td>
                    <td>{d.pr ? `#${d.pr}` : ""}</td>
                    <td>
                      <StateBadge tone={resultTone(d.result)}>{resultText(d.result, t)}</StateBadge>
                    </td>
                    <td className="small">{deliveryReason(d, t)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
      </section>
    </>
  );
}
