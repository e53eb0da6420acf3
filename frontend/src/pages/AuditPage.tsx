import { useMemo, useRef, useState, type FormEvent } from "react";
import { Link } from "wouter";
import { api } from "../api/client";
import type { AuditEntry } from "../api/types";
import { CommandError } from "../components/CommandError";
import { formatTime } from "../format";
import { useT } from "../i18n";
import { useLiveAudit } from "../live/store";
import { useLoad } from "../live/useLoad";

interface Filter {
  slot: string;
  job: string;
  actor: string;
  kind: string;
  since: string; // datetime-local value
}

const empty: Filter = { slot: "", job: "", actor: "", kind: "", since: "" };

/** matches applies a filter to a live entry the way the server does. */
export function matches(e: AuditEntry, f: Filter): boolean {
  if (f.slot && e.slot !== f.slot) return false;
  if (f.job && e.job_id !== f.job) return false;
  if (f.actor && e.actor !== f.actor) return false;
  if (f.kind && e.type !== f.kind) return false;
  if (f.since && Date.parse(e.time) < Date.parse(f.since)) return false;
  return true;
}

/** AuditPage lists the log with filters, then follows it live. */
export function AuditPage() {
  const t = useT();
  const [draft, setDraft] = useState<Filter>(empty);
  const [filter, setFilter] = useState<Filter>(empty);
  const [pages, setPages] = useState<number[]>([0]);
  const since = filter.since ? new Date(filter.since).toISOString() : undefined;
  const after = pages[pages.length - 1];
  const fkey = JSON.stringify(filter);
  // Pages accumulate per filter; a new filter starts from the first page.
  const acc = useRef<{ fkey: string; entries: AuditEntry[] }>({ fkey: "", entries: [] });
  const load = useLoad(`audit`, JSON.stringify({ fkey, after }), async (signal) => {
    const got =
      (await api.audit({ slot: filter.slot, job: filter.job, actor: filter.actor, kind: filter.kind, since, after: after || undefined, limit: 200 }, signal))
        .entries ?? [];
    const base = after && acc.current.fkey === fkey ? acc.current.entries : [];
    const last = base.length > 0 ? base[base.length - 1].position : 0;
    acc.current = { fkey, entries: [...base, ...got.filter((e) => e.position > last)] };
    return { entries: acc.current.entries, pageSize: got.length };
  });
  const fetched = useMemo(() => load.data?.entries ?? [], [load.data]);
  const live = useLiveAudit();
  const entries = useMemo(() => {
    const last = fetched.length > 0 ? fetched[fetched.length - 1].position : 0;
    return [...fetched, ...live.filter((e) => e.position > last && matches(e, filter))];
  }, [fetched, live, filter]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    setFilter(draft);
    setPages([0]);
  };
  const field = (k: keyof Filter, label: string, type = "text") => (
    <label>
      {label}{" "}
      <input type={type} value={draft[k]} onChange={(e) => setDraft({ ...draft, [k]: e.target.value })} />
    </label>
  );
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">{t("audit.title")}</h1>
      <form className="filters" onSubmit={submit}>
        {field("slot", t("audit.slot"))}
        {field("job", t("audit.job"))}
        {field("actor", t("audit.actor"))}
        {field("kind", t("audit.kind"))}
        {field("since", t("audit.since"), "datetime-local")}
        <button type="submit">{t("audit.apply")}</button>
      </form>
      {load.error && <CommandError error={load.error} />}
      {!load.loading && entries.length === 0 && <p>{t("audit.empty")}</p>}
      <div className="table-wrap">
        <table data-testid="audit-table" className="stack-on-phone">
          <thead>
            <tr>
              <th>{t("audit.position")}</th>
              <th>{t("audit.time")}</th>
              <th>{t("audit.kind")}</th>
              <th>{t("audit.slot")}</th>
              <th>{t("audit.actor")}</th>
              <th>{t("audit.summary")}</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e) => (
              <tr key={e.position}>
                <td data-label={t("audit.position")}>{e.position}</td>
                <td data-label={t("audit.time")}>{formatTime(e.time, t.lang)}</td>
                <td data-label={t("audit.kind")}>{e.type}</td>
                <td data-label={t("audit.slot")}>{e.slot ? <Link href={`/slots/${encodeURIComponent(e.slot)}`}>{e.slot}</Link> : ""}</td>
                <td data-label={t("audit.actor")}>{e.actor}</td>
                <td data-label={t("audit.summary")}>
                  {e.job_id ? <Link href={`/jobs/${encodeURIComponent(e.job_id)}`}>{e.summary || e.job_id}</Link> : e.summary}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {load.data && load.data.pageSize >= 200 && (
        <button type="button" onClick={() => setPages([...pages, entries[entries.length - 1]?.position ?? 0])}>
          {t("audit.more")}
        </button>
      )}
    </section>
  );
}
