import { useMemo, useRef, useState, type FormEvent, type ReactNode } from "react";
import { Link } from "wouter";
import { momentHref } from "../replay/moment";
import { auditService, isPerson, type AuditEntry } from "../services/audit";
import { CommandError } from "../components/CommandError";
import { When } from "../components/When";
import { auditFailure, auditSummary } from "../format";
import { Actor } from "../components/Actor";
import { FailureRaw } from "../components/FailureRaw";
import { useT } from "../i18n";
import { useLiveAudit } from "../live/store";
import { useHashQuery, writeHashQuery } from "../live/hashQuery";
import { useLoad } from "../live/useLoad";
import { ACTION_GROUPS, actionGroup, EVENT_TYPES, type ActionGroup } from "./auditGroups";
import { TableWrap } from "../components/TableWrap";

interface Filter {
  slot: string;
  job: string;
  actor: string;
  kind: string;
  since: string; // datetime-local value
}


/**
 * fromQuery reads the filters and the action chip from the hash route's
 * query ("#/audit?actor=bob&group=jobs"), so a filtered view can be shared
 * and survives a reload. An unknown type or action group is ignored.
 */
export function fromQuery(query: string): { filter: Filter; group: ActionGroup | "" } {
  const q = new URLSearchParams(query);
  const get = (k: string) => q.get(k) ?? "";
  const kind = get("kind");
  const group = get("group");
  return {
    filter: { slot: get("slot"), job: get("job"), actor: get("actor"), kind: (EVENT_TYPES as readonly string[]).includes(kind) ? kind : "", since: get("since") },
    group: (ACTION_GROUPS as readonly string[]).includes(group) ? (group as ActionGroup) : "",
  };
}
const PAGE = 200;
/** CHIPS: how many people and slots get a chip (the most frequent among the shown entries). */
const CHIPS = 8;

/** matches applies a filter to a live entry the way the server does. */
export function matches(e: AuditEntry, f: Filter): boolean {
  if (e.plumbing) return false; // the server leaves these out of the audit too
  if (f.slot && e.slot !== f.slot) return false;
  if (f.job && e.job_id !== f.job) return false;
  if (f.actor && e.actor !== f.actor) return false;
  if (f.kind && e.type !== f.kind) return false;
  if (f.since && Date.parse(e.time) < Date.parse(f.since)) return false;
  return true;
}

/** frequent lists the most frequent non-empty values, most frequent first. */
export function frequent(values: readonly (string | undefined)[], n: number): string[] {
  const count = new Map<string, number>();
  for (const v of values) if (v) count.set(v, (count.get(v) ?? 0) + 1);
  return [...count.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, n)
    .map(([v]) => v);
}

function Chip({ pressed, onClick, children, testid }: { pressed: boolean; onClick: () => void; children: ReactNode; testid: string }) {
  return (
    <button type="button" className="chip" aria-pressed={pressed} onClick={onClick} data-testid={testid}>
      {pressed && <span aria-hidden="true">✓ </span>}
      {children}
    </button>
  );
}

/**
 * AuditPage lists the log newest first, with filters (sent to the server)
 * and chips: a kind of action (narrows what is shown), a person or a slot
 * (a server filter, like the fields). New entries arrive live at the top.
 */
export function AuditPage() {
  const t = useT();
  // The filters live in the hash route's query (useHashQuery); the form's
  // draft and the loaded pages belong to the query they were made for, so a
  // changed address (a pasted link, Back) starts them again.
  const query = useHashQuery();
  const { filter, group } = useMemo(() => fromQuery(query), [query]);
  const fkey = JSON.stringify(filter);
  const [draftFor, setDraftFor] = useState<{ query: string; draft: Filter }>({ query, draft: filter });
  const draft = draftFor.query === query ? draftFor.draft : filter;
  const setDraft = (d: Filter) => setDraftFor({ query, draft: d });
  const [pagesFor, setPagesFor] = useState<{ fkey: string; pages: number[] }>({ fkey, pages: [0] });
  const pages = pagesFor.fkey === fkey ? pagesFor.pages : [0];
  const setPages = (p: number[]) => setPagesFor({ fkey, pages: p });
  const since = filter.since && !Number.isNaN(Date.parse(filter.since)) ? new Date(filter.since).toISOString() : undefined;
  const before = pages[pages.length - 1];
  // Pages accumulate per filter, newest first; a new filter starts again.
  const acc = useRef<{ fkey: string; entries: AuditEntry[] }>({ fkey: "", entries: [] });
  const load = useLoad(`audit`, JSON.stringify({ fkey, before }), async (signal) => {
    const got =
      (
        await auditService.list(
          { slot: filter.slot, job: filter.job, actor: filter.actor, kind: filter.kind, since, before: before || undefined, order: "newest", limit: PAGE },
          signal,
        )
      ).entries ?? [];
    const base = before && acc.current.fkey === fkey ? acc.current.entries : [];
    const oldest = base.length > 0 ? base[base.length - 1].position : Infinity;
    acc.current = { fkey, entries: [...base, ...got.filter((e) => e.position < oldest)] };
    return { entries: acc.current.entries, pageSize: got.length };
  });
  const fetched = useMemo(() => load.data?.entries ?? [], [load.data]);
  const live = useLiveAudit();
  const entries = useMemo(() => {
    const newest = fetched.length > 0 ? fetched[0].position : 0;
    const fresh = live.filter((e) => e.position > newest && matches(e, filter)).sort((a, b) => b.position - a.position);
    return [...fresh, ...fetched];
  }, [fetched, live, filter]);
  const shown = useMemo(() => (group ? entries.filter((e) => actionGroup(e.type) === group) : entries), [entries, group]);
  // People are accounts and tokens, never a job worker or the system.
  const people = useMemo(() => frequent(entries.filter(isPerson).map((e) => e.actor), CHIPS), [entries]);
  const slots = useMemo(() => frequent(entries.map((e) => e.slot), CHIPS), [entries]);

  const write = (f: Filter, g: ActionGroup | "") => writeHashQuery({ ...f, group: g });
  const apply = (f: Filter) => write(f, group);
  const setGroup = (g: ActionGroup | "") => write(filter, g);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    apply(draft);
  };
  const field = (k: keyof Filter, label: string, type = "text") => (
    <label>
      {label}{" "}
      <input type={type} value={draft[k]} onChange={(e) => setDraft({ ...draft, [k]: e.target.value })} />
    </label>
  );
  const toggle = (k: "actor" | "slot", v: string) => apply({ ...filter, [k]: filter[k] === v ? "" : v });
  return (
    <section aria-labelledby="audit-title" className="stack">
      <h1 id="audit-title">{t("audit.title")}</h1>
      <div className="chips" role="group" aria-label={t("audit.by_action")} data-testid="audit-groups">
        <span className="chips-label">{t("audit.by_action")}</span>
        <Chip pressed={group === ""} onClick={() => setGroup("")} testid="chip-group-all">
          {t("audit.all")}
        </Chip>
        {ACTION_GROUPS.map((g) => (
          <Chip key={g} pressed={group === g} onClick={() => setGroup(group === g ? "" : g)} testid={`chip-group-${g}`}>
            {t(`audit.group.${g}`)}
          </Chip>
        ))}
      </div>
      {(people.length > 0 || filter.actor) && (
        <div className="chips" role="group" aria-label={t("audit.by_person")} data-testid="audit-people">
          <span className="chips-label">{t("audit.by_person")}</span>
          {(filter.actor && !people.includes(filter.actor) ? [filter.actor, ...people] : people).map((p) => (
            <Chip key={p} pressed={filter.actor === p} onClick={() => toggle("actor", p)} testid="chip-person">
              {p}
            </Chip>
          ))}
        </div>
      )}
      {(slots.length > 0 || filter.slot) && (
        <div className="chips" role="group" aria-label={t("audit.by_slot")} data-testid="audit-slots">
          <span className="chips-label">{t("audit.by_slot")}</span>
          {(filter.slot && !slots.includes(filter.slot) ? [filter.slot, ...slots] : slots).map((s) => (
            <Chip key={s} pressed={filter.slot === s} onClick={() => toggle("slot", s)} testid="chip-slot">
              {s}
            </Chip>
          ))}
        </div>
      )}
      <details>
        <summary>{t("audit.more_filters")}</summary>
        <form className="filters" onSubmit={submit}>
          {field("slot", t("audit.slot"))}
          {field("job", t("audit.job"))}
          {field("actor", t("audit.actor"))}
          <label>
            {t("audit.kind")}{" "}
            <select value={draft.kind} onChange={(e) => setDraft({ ...draft, kind: e.target.value })} data-testid="audit-kind">
              <option value="">{t("audit.all")}</option>
              {EVENT_TYPES.map((k) => (
                <option key={k} value={k}>
                  {t.dyn("event", k)}
                </option>
              ))}
            </select>
          </label>
          {field("since", t("audit.since"), "datetime-local")}
          <button type="submit">{t("audit.apply")}</button>
        </form>
      </details>
      {load.error && <CommandError error={load.error} />}
      {!load.loading && shown.length === 0 && <p>{t("audit.empty")}</p>}
      <TableWrap label={t("audit.caption")}>
        <table data-testid="audit-table" className="stack-on-phone">
          <caption className="sr-only">{t("audit.caption")}</caption>
          <thead>
            <tr>
              <th scope="col">{t("audit.time")}</th>
              <th scope="col">{t("audit.kind")}</th>
              <th scope="col">{t("audit.slot")}</th>
              <th scope="col">{t("audit.actor")}</th>
              <th scope="col">{t("audit.summary")}</th>
              <th scope="col">{t("audit.position")}</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((e) => (
              <tr key={e.position} data-testid="audit-row" data-type={e.type}>
                <td data-label={t("audit.time")} className="nowrap">
                  <When iso={e.time} />
                </td>
                <td data-label={t("audit.kind")}>{t.dyn("event", e.type)}</td>
                <td data-label={t("audit.slot")} className="nowrap">{e.slot ? <Link href={`/slots/${encodeURIComponent(e.slot)}`}>{e.slot}</Link> : ""}</td>
                <td data-label={t("audit.actor")}>
                  <Actor actor={e.actor} />
                </td>
                <td data-label={t("audit.summary")} data-testid="audit-summary">
                  {/* One block: on a phone the cell is a label-and-value grid, and the fold belongs under the value. */}
                  <div>
                    {e.job_id ? <Link href={`/jobs/${encodeURIComponent(e.job_id)}`}>{auditSummary(e, t)}</Link> : auditSummary(e, t)}
                    <AuditRaw e={e} />
                  </div>
                </td>
                <td data-label={t("audit.position")} className="muted nowrap num">
                  {e.slot ? (
                    <Link href={momentHref(e.slot, e.position)} title={t("asof.link")} data-testid="audit-moment">
                      {e.position}
                    </Link>
                  ) : (
                    e.position
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
      {load.data && load.data.pageSize >= PAGE && (
        <button type="button" onClick={() => setPages([...pages, fetched[fetched.length - 1]?.position ?? 0])}>
          {t("audit.more")}
        </button>
      )}
    </section>
  );
}

/** AuditRaw is an entry's original failure text (the provider's words), folded under its summary's sentence. */
function AuditRaw({ e }: { e: AuditEntry }) {
  const f = auditFailure(e);
  return f ? <FailureRaw failure={f} /> : null;
}
