// The waitlist page (/#/waitlist): your place and estimate, your offer with
// its countdown and accept/decline, warnings before your slots' deadlines
// with an extend button, the join form when nothing is free, and the queue
// for everyone. Live: reloaded when the stream shows a relevant event.
import { useEffect, useRef, useState } from "react";
import { Link, useLocation } from "wouter";
import { setOutcome } from "../live/outcome";
import { CommandError } from "../components/CommandError";
import { Countdown } from "../components/Countdown";
import { formatDuration, formatGoDuration, formatTime, known } from "../format";
import { useSubject } from "../auth/session";
import { useT, type T } from "../i18n";
import { announce } from "../live/announce";
import { useSlots } from "../live/store";
import { useCommand } from "../live/useCommand";
import { waitlistService, type DeadlineWarning, type Estimate, type WaitlistEntry } from "../services/waitlist";
import { useWaitlist } from "./useWaitlist";
import { TableWrap } from "../components/TableWrap";

/** What the extend link in a warning adds (the server's --warn-extend default). */
export const EXTEND_BY_MS = 60 * 60 * 1000;

const DURATIONS = ["1h", "2h", "4h", "8h", "24h"];

/** estimateBasis says how an estimate was made in the reader's language (basis_code); an older server's English as written. */
function estimateBasis(e: Estimate, t: T): string {
  const key = `waitlist.basis.${e.basis_code}`;
  if (!e.basis_code || !known(key)) return e.basis;
  const args = { ...e.basis_args };
  if (args.median) args.median = formatGoDuration(args.median, t);
  return t(key, args);
}

function EstimateText({ e }: { e: Estimate }) {
  const t = useT();
  if (e.seconds === null || !e.at) {
    return (
      <span data-testid="estimate" title={estimateBasis(e, t)}>
        {t("waitlist.estimate_unknown")}
      </span>
    );
  }
  return (
    <span data-testid="estimate" title={e.basis}>
      {e.seconds <= 0 ? t("waitlist.estimate_now") : <Countdown until={e.at} overdueLabel={false} />}
    </span>
  );
}

function Warnings({ warnings, focusSlot, reload }: { warnings: DeadlineWarning[]; focusSlot?: string; reload: () => void }) {
  const t = useT();
  const cmd = useCommand();
  const focusRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    focusRef.current?.focus();
  }, [focusSlot, warnings.length]);
  if (warnings.length === 0) return null;
  return (
    <section className="banner warning" role="alert" data-testid="deadline-warnings">
      {warnings.map((w) => (
        <p key={w.slot + w.deadline}>
          {t("waitlist.warning", { slot: w.slot })} <Countdown until={w.deadline} />{" "}
          <button
            ref={w.slot === focusSlot ? focusRef : undefined}
            disabled={cmd.pending}
            onClick={() =>
              void cmd
                .run(() => waitlistService.extend(w.slot, new Date(Date.parse(w.deadline) + EXTEND_BY_MS).toISOString()))
                .then((r) => {
                  if (r !== undefined) {
                    announce(t("waitlist.extended", { slot: w.slot }));
                    reload();
                  }
                })
            }
            data-testid={`extend-${w.slot}`}
          >
            {t("waitlist.extend", { time: formatDuration(EXTEND_BY_MS, t) })}
          </button>
        </p>
      ))}
      <CommandError error={cmd.error} />
    </section>
  );
}

function MyEntry({ entry, reload }: { entry: WaitlistEntry; reload: () => void }) {
  const t = useT();
  const cmd = useCommand();
  const [, navigate] = useLocation();
  // Accepting lands on the slot (issue 35 item 10): the entry leaves the
  // waitlist, so staying here showed the join form's "every slot is taken".
  const accept = (slot: string) =>
    void cmd.run(() => waitlistService.accept(entry.id)).then((r) => {
      if (r === undefined) return;
      const said = t("waitlist.accepted", { slot });
      announce(said);
      setOutcome({ where: `slot:${slot}`, text: said });
      navigate(`/slots/${encodeURIComponent(slot)}`);
    });
  const act = (fn: () => Promise<unknown>, said: string) =>
    void cmd.run(fn).then((r) => {
      if (r !== undefined) {
        announce(said);
        reload();
      }
    });
  return (
    <section className="card" aria-labelledby="my-entry" data-testid="my-entry">
      <h2 id="my-entry">{t("waitlist.mine")}</h2>
      {entry.offer ? (
        <div className="offer" data-testid="offer">
          <p>
            <strong>{t("waitlist.offer", { slot: entry.offer.slot })}</strong>{" "}
            {t("waitlist.offer_expires")} <Countdown until={entry.offer.expires_at} overdueLabel={false} />
          </p>
          <button
            disabled={cmd.pending}
            onClick={() => accept(entry.offer?.slot ?? "")}
            data-testid="accept"
          >
            {t("waitlist.accept")}
          </button>{" "}
          <button disabled={cmd.pending} onClick={() => act(() => waitlistService.decline(entry.id), t("waitlist.declined"))} data-testid="decline">
            {t("waitlist.decline")}
          </button>
        </div>
      ) : (
        <p data-testid="my-position">
          {t("waitlist.position", { n: entry.position })} · {t("waitlist.estimate")} <EstimateText e={entry.estimated_wait} />
          <br />
          <small className="muted" data-testid="estimate-basis">
            {estimateBasis(entry.estimated_wait, t)}
          </small>
        </p>
      )}
      <p>
        <button disabled={cmd.pending} onClick={() => act(() => waitlistService.leave(entry.id), t("waitlist.left"))} data-testid="leave">
          {t("waitlist.leave")}
        </button>
      </p>
      <CommandError error={cmd.error} />
    </section>
  );
}

function JoinForm({ reload, anyVacant }: { reload: () => void; anyVacant: boolean }) {
  const t = useT();
  const cmd = useCommand();
  const [duration, setDuration] = useState("2h");
  const [note, setNote] = useState("");
  if (anyVacant) {
    return (
      <p data-testid="slot-free">
        {t("waitlist.slot_free")} <Link href="/">{t("nav.board")}</Link>
      </p>
    );
  }
  return (
    <form
      className="card"
      data-testid="join-form"
      onSubmit={(e) => {
        e.preventDefault();
        void cmd.run(() => waitlistService.join(duration, note.trim())).then((r) => {
          if (r !== undefined) {
            announce(t("waitlist.joined"));
            reload();
          }
        });
      }}
    >
      <h2>{t("waitlist.join_title")}</h2>
      <p>{t("waitlist.none_free")}</p>
      <label>
        {t("waitlist.duration")}{" "}
        <select value={duration} onChange={(e) => setDuration(e.target.value)} data-testid="join-duration">
          {DURATIONS.map((d) => (
            <option key={d} value={d}>
              {d}
            </option>
          ))}
        </select>
      </label>{" "}
      <label>
        {t("waitlist.note")} <input value={note} maxLength={200} onChange={(e) => setNote(e.target.value)} data-testid="join-note" />
      </label>{" "}
      <button type="submit" disabled={cmd.pending} data-testid="join">
        {t("waitlist.join")}
      </button>
      <CommandError error={cmd.error} />
    </form>
  );
}

/** extendParam reads ?extend=<slot> (the webhook's link: /?extend=<slot>#/waitlist). */
function extendParam(): string | undefined {
  if (typeof window === "undefined") return undefined;
  return new URLSearchParams(window.location.search).get("extend") ?? undefined;
}

export function WaitlistPage() {
  const t = useT();
  const me = useSubject();
  const wl = useWaitlist();
  const slots = useSlots();
  const anyVacant = [...slots.values()].some((s) => s.lifecycle === "vacant");
  const entries = wl.data?.entries ?? [];
  const mine = me ? entries.find((e) => e.who_id === me.id) : undefined;
  const warnings = me ? (wl.data?.warnings ?? []).filter((w) => w.occupant === me.name) : [];
  return (
    <div data-testid="waitlist-page">
      <h1>{t("waitlist.title")}</h1>
      <Warnings warnings={warnings} focusSlot={extendParam()} reload={wl.reload} />
      {wl.error && !wl.data && <CommandError error={wl.error} />}
      {!wl.data && !wl.error && <p>{t("common.loading")}</p>}
      {wl.data && me && (mine ? <MyEntry entry={mine} reload={wl.reload} /> : <JoinForm reload={wl.reload} anyVacant={anyVacant} />)}
      {wl.data && !me && <p>{t("waitlist.sign_in")}</p>}
      {wl.data && (
        <section aria-labelledby="queue">
          <h2 id="queue">{t("waitlist.queue", { count: entries.length })}</h2>
          {entries.length === 0 ? (
            <p data-testid="queue-empty">{t("waitlist.empty")}</p>
          ) : (
            <TableWrap label={t("waitlist.title")}>
              <table data-testid="queue">
                <thead>
                  <tr>
                    <th scope="col">#</th>
                    <th scope="col">{t("waitlist.who")}</th>
                    <th scope="col">{t("waitlist.duration")}</th>
                    <th scope="col">{t("waitlist.estimate_col")}</th>
                    <th scope="col">{t("waitlist.joined_at")}</th>
                  </tr>
                </thead>
                <tbody>
                  {entries.map((e) => (
                    <tr key={e.id} data-testid="queue-row">
                      <td>{e.position}</td>
                      <td>
                        {e.who}
                        {e.note ? <small className="muted"> — {e.note}</small> : null}
                      </td>
                      <td>{formatGoDuration(e.duration, t)}</td>
                      <td>
                        {e.offer ? t("waitlist.offered", { slot: e.offer.slot }) : <EstimateText e={e.estimated_wait} />}
                      </td>
                      <td>{formatTime(e.joined_at, t.lang)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
          <p className="muted small">{t("waitlist.how", { ttl: formatGoDuration(wl.data.offer_ttl, t) })}</p>
        </section>
      )}
    </div>
  );
}
