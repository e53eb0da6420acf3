// A guard over whole pages: each page the newcomer walk visits (board, slot,
// job, audit, admin, simulator, sign-in) renders in Korean from server
// answers shaped like the real ones — the server's own English in every
// field that carries some (a step's error, a job's reason, a slot's state
// reason, Coolify's app status, an audit summary, a webhook attempt's and a
// reconcile run's error, a delivery's reason) — and what a reader sees
// without opening a fold has no Latin-letter word but ids, names and
// product names. A new English string on any of these pages fails here.
// Job workers come with their real ids (worker:<host:pid>/<nonce>/<n>),
// which are not in IDS: a page shows a worker by its number, the id only as
// a tooltip.
import { act, cleanup, render } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setAuthForTest } from "../auth/session";
import { AdminPage } from "../pages/AdminPage";
import { AuditPage } from "../pages/AuditPage";
import { Board } from "../pages/Board";
import { JobPage } from "../pages/JobPage";
import { ReconcilePage } from "../pages/ReconcilePage";
import { SignIn } from "../pages/SignIn";
import { SlotPage } from "../pages/SlotPage";
import { SimulatorPage } from "../sim/SimulatorPage";
import type { AuditEntry } from "../services/audit";
import { applySnapshot, putJob } from "../live/store";
import { job, jsonResponse, slot, step } from "../test/fakes";
import { latinWords } from "../test/latin";
import { setLang } from "./index";

const JOB = "6223df64-dc49-4d70-828d-c4b118db1ebb";
const RAW = "remove the mount of volume data-aurora: coolify.DeleteStorage avo/cbt: forbidden (HTTP 403): You are not allowed to perform this action.";
const ARGS = { provider: "coolify", problem: "forbidden", target: "cbt8eaec3bv1" };
/** A worker's id as backend/jobs writes it: host:pid, the engine's nonce, its number. */
const WORKER = "worker:build-host-7:4121/9f2c1ab0/1";

/** Ids, names and values the pages show as they are. */
const IDS = [JOB, "aurora", "birch", "alice", "minjun", "demo-admin", "PRJ/aurora", "PRJ/template", "PRJ/birch", "PRJ", "template", "main", "cbt8eaec3bv1", "a-1", "d-1", "p-1", "w1", "coolify.DeleteStorage", "coolify.DeleteDatabase", "coolify.ListEnvs", "coolify.DeleteEnv", "coolify.ListStorages", "git.ReceivePack", "coolify.DeleteApplication", "bitbucket.DeleteRepo", "coolify.DeleteProject", "bitbucket.GetRepo", "bitbucket.CreateRepo", "DEMO", "webshop", "feature/checkout", "tok-1", "ci", "pullRequest.fromRef.latestCommit", "pr:opened", "pr:comment:added", "req-1", "req-2", "req-3", "coolify:p-1"];

const aurora = slot({
  name: "aurora",
  lifecycle: "occupied",
  occupant: "alice",
  deadline: "2099-01-01T00:00:00Z",
  repo: { project: "PRJ", slug: "aurora" },
  state_reason: "last job failed",
  state_reason_code: "last_job",
  state_reason_args: { outcome: "failed" },
  deployed: { fqdn: "http://aurora.example.test", status: "running:unknown", no_health_check: true, commit: "0aa857559c8f", job_id: JOB, deployed_at: "2026-01-01T00:00:00Z" },
});
const birch = slot({ name: "birch", lifecycle: "vacant", occupant: undefined, repo: { project: "PRJ", slug: "birch" }, has_template: true, missing: ["not reset to its template yet: it is as it was registered"], missing_code: "never_reset" });

const failed = job({
  id: JOB,
  slot: "aurora",
  state: "failed",
  steps: [
    step("delete_db", "done", { detail: "Coolify's record is gone (GET answers its own 404 after the queued delete); this does not prove the server cleaned up", detail_code: "row_gone_only" }),
    step("delete_volumes", "failed", { http_status: 403, error: RAW, error_code: "provider", error_args: ARGS, attempt: 1, started_at: "2026-01-01T00:00:01Z", ended_at: "2026-01-01T00:00:02Z" }),
    step("force_push_template", "pending"),
  ],
  reason: RAW,
  reason_code: "provider",
  reason_args: ARGS,
  resumable: true,
  cancellable: false,
  attempts: [{ number: 1, worker: WORKER, claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:00:30Z", outcome: "failed" }],
  revision: 4,
});

const audit: AuditEntry[] = [
  // A webhook attempt's failure with its code, and one recorded before the codes; a reconcile run's; a refused post on a pull request.
  { position: 10, stream: `notify-${JOB}`, type: "NotificationFailed", job_id: JOB, actor: "system:notifier", time: "2026-01-01T00:00:05Z", summary: "webhook attempt 2 failed: timed out: context deadline exceeded (Client.Timeout exceeded while awaiting headers)", args: { attempt: "2", error: "timed out: context deadline exceeded (Client.Timeout exceeded while awaiting headers)", error_code: "webhook_timeout", bound: "10s" } },
  { position: 9, stream: `notify-${JOB}`, type: "NotificationFailed", job_id: JOB, actor: "system:notifier", time: "2026-01-01T00:00:04Z", summary: "webhook failed for good on attempt 1: HTTP 410", args: { attempt: "1", status: "410", error: "HTTP 410", final: "true" } },
  { position: 8, stream: "reconcile", type: "ReconcileFinished", actor: "system:reconcile", time: "2026-01-01T00:00:04Z", summary: "reconcile run failed: read tracked resources: store closed", args: { state: "failed", error: "read tracked resources: store closed", error_code: "reconcile_tracked" } },
  { position: 7, stream: "pr-PRJ-webshop-4", type: "PRReportFailed", actor: "system:pull-requests", time: "2026-01-01T00:00:03Z", summary: "could not post on the pull request (ready): bitbucket.AddComment answered unauthorized", args: { phase: "ready", call: "bitbucket.AddComment", code: "unauthorized", error_code: "provider", provider: "bitbucket", problem: "unauthorized" } },
  { position: 6, stream: `job-${JOB}`, type: "JobClaimed", slot: "aurora", job_id: JOB, actor: WORKER, actor_kind: "worker", time: "2026-01-01T00:00:00Z", summary: `attempt 1 claimed by ${WORKER}`, args: { attempt: "1", worker: WORKER } },
  { position: 5, stream: `job-${JOB}`, type: "JobFailed", slot: "aurora", job_id: JOB, actor: WORKER, time: "2026-01-01T00:00:02Z", summary: `job failed: ${RAW}`, args: { reason: RAW, error_code: "provider", ...ARGS } },
  { position: 4, stream: `job-${JOB}`, type: "StepFailed", slot: "aurora", job_id: JOB, actor: WORKER, time: "2026-01-01T00:00:02Z", summary: "x", args: { step: "delete_volumes", status: "403", error: RAW, error_code: "provider", ...ARGS } },
  { position: 3, stream: `job-${JOB}`, type: "WaitPhase", slot: "aurora", job_id: JOB, actor: WORKER, time: "2026-01-01T00:00:01Z", summary: "x", args: { step: "deploy", state: "building", count: "0" } },
  { position: 2, stream: `job-${JOB}`, type: "JobQueued", slot: "aurora", job_id: JOB, actor: "system:deadline", time: "2026-01-01T00:00:00Z", summary: "x", args: { kind: "reset", by: "system:deadline" } },
  { position: 1, stream: "session-1", type: "SessionEnded", actor: "demo-admin", time: "2026-01-01T00:00:00Z", summary: "x", args: { reason: "logout" } },
];

function answer(url: string): Response {
  const path = url.split("?")[0];
  if (path.endsWith("/plan")) return jsonResponse({ kind: "reset", slot: "aurora", steps: ["delete_db", "delete_volumes", "vacate"], resources: [{ kind: "database", id: "d-1" }], not_before: "2026-01-01T00:02:00Z" });
  if (/\/api\/slots\/[^/]+\/jobs/.test(path)) return jsonResponse({ jobs: [failed] });
  if (path === "/api/slots/aurora") return jsonResponse(aurora);
  if (path === "/api/slots/birch") return jsonResponse(birch);
  if (path.endsWith("/events"))
    return jsonResponse({
      events: [
        { position: 0, stream: `job-${JOB}`, revision: 0, type: "JobClaimed", data: { job_id: JOB, worker: WORKER, attempt: 1 }, meta: { actor: WORKER, time: "2026-01-01T00:00:00Z" } },
        { position: 1, stream: `job-${JOB}`, revision: 0, type: "StepFailed", data: { step: "delete_volumes", attempt: 1, http_status: 403, error: RAW, error_code: "provider", error_args: ARGS }, meta: null },
        { position: 2, stream: `job-${JOB}`, revision: 1, type: "JobFailed", data: { attempt: 1, reason: RAW, reason_code: "provider", reason_args: ARGS, failed_step: "delete_volumes" }, meta: null },
      ],
    });
  if (path.startsWith("/api/jobs/")) return jsonResponse(failed);
  if (path === "/api/audit") return jsonResponse({ entries: audit });
  if (path === "/api/admin/users") return jsonResponse({ users: [{ id: "u-1", name: "demo-admin", role: "admin", created_at: "2026-01-01T00:00:00Z" }] });
  if (path === "/api/admin/tokens") return jsonResponse({ tokens: [{ id: "tok-1", name: "ci", role: "viewer", created_at: "2026-01-01T00:00:00Z", expires_at: "2099-01-01T00:00:00Z" }] });
  if (path === "/api/pr-repos") return jsonResponse({ repos: [{ project: "PRJ", slug: "webshop" }] });
  // The deliveries list: the server's English reason beside each code.
  if (path === "/api/hooks/bitbucket/deliveries")
    return jsonResponse({
      deliveries: [
        { time: "2026-01-01T00:00:03Z", request_id: "req-3", event_key: "pr:opened", result: "refused", reason: "the X-Hub-Signature does not match the body under the configured webhook secret", reason_code: "bad_signature" },
        { time: "2026-01-01T00:00:02Z", request_id: "req-2", event_key: "pr:opened", repo: "PRJ/webshop", result: "refused", reason: "pullRequest.fromRef.latestCommit \"zz\" is not a commit", reason_code: "malformed", reason_args: { field: "pullRequest.fromRef.latestCommit" } },
        { time: "2026-01-01T00:00:01Z", request_id: "req-1", event_key: "pr:comment:added", result: "ignored", reason: "event \"pr:comment:added\" is not one the pull-request flow acts on", reason_code: "event_ignored", reason_args: { key: "pr:comment:added" } },
      ],
    });
  // A failed reconcile run with its code, and a finding the reconciler could not check.
  if (path === "/api/reconcile")
    return jsonResponse({
      run: { id: "r-1", state: "failed", started_at: "2026-01-01T00:00:00Z", ended_at: "2026-01-01T00:05:00Z", scope: ["coolify:p-1"], counts: { unknown: 1 }, error: "context deadline exceeded", error_code: "reconcile_timeout", error_args: { bound: "5m0s" } },
      findings: [{ run_id: "r-1", class: "unknown", provider: "coolify", kind: "project", id: "p-1", scope: "coolify:p-1", detail: "could not check: coolify.ListApplications: server error (HTTP 502)", error_code: "provider", error_args: { provider: "coolify", problem: "server", status: "502" }, since: "2026-01-01T00:00:00Z" }],
      position: 8,
    });
  if (path === "/api/sim/faults") return jsonResponse({ faults: [{ id: 1, endpoint: "coolify.DeleteStorage", status: 403, times: 1, resources: ["a-1"] }] });
  return jsonResponse({ error: { code: "not_found", message: "not found" } }, 404);
}

/** visibleText is what a reader sees without opening a fold: no <details> bodies, no code, no raw data, no link targets. */
function visibleText(el: HTMLElement): string {
  const copy = el.cloneNode(true) as HTMLElement;
  for (const d of copy.querySelectorAll("details")) for (const c of [...d.childNodes]) if (!(c instanceof HTMLElement && c.tagName === "SUMMARY")) c.remove();
  for (const c of copy.querySelectorAll("code, pre, option, [hidden], .sr-only")) c.remove();
  for (const a of copy.querySelectorAll("a")) if (/^https?:/.test(a.getAttribute("href") ?? "")) a.remove();
  return copy.textContent ?? "";
}

beforeEach(() => {
  setLang("ko");
  setAuthForTest({ id: "user:u-1", name: "demo-admin", role: "admin" });
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => answer(url)),
  );
  applySnapshot({ position: 5, server_time: "2026-01-01T00:00:00Z", slots: [aurora, birch] });
  putJob(failed);
});

const flush = async () => {
  await act(async () => {});
  await act(async () => {});
};

const at = (path: string, route: string, el: (p: Record<string, string | undefined>) => React.ReactNode) => (
  <Router hook={memoryLocation({ path }).hook}>
    <Route path={route}>{(p) => el(p)}</Route>
  </Router>
);

describe("every page of the walk in Korean", () => {
  it.each([
    ["board", () => at("/", "/", () => <Board />)],
    ["slot page", () => at("/slots/aurora", "/slots/:name", (p) => <SlotPage name={p.name ?? ""} />)],
    ["vacant slot page", () => at("/slots/birch", "/slots/:name", (p) => <SlotPage name={p.name ?? ""} />)],
    ["job page", () => at(`/jobs/${JOB}`, "/jobs/:id", (p) => <JobPage id={p.id ?? ""} />)],
    ["audit", () => at("/audit", "/audit", () => <AuditPage />)],
    ["admin", () => <AdminPage />],
    ["reconcile", () => <ReconcilePage />],
    ["simulator", () => at("/simulator", "/simulator", () => <SimulatorPage />)],
    ["sign-in", () => <SignIn methods={["local", "demo"]} expired={false} />],
  ] as const)("%s has no English a reader sees", async (_name, page) => {
    const { container } = render(page());
    await flush();
    const seen = visibleText(container);
    expect(seen.length).toBeGreaterThan(20);
    expect(latinWords(seen, IDS), seen).toEqual([]);
  });

  it("the pages checked above show what they are meant to: the deliveries, the run's error, the coded failures", async () => {
    const admin = render(<AdminPage />);
    await flush();
    const rows = admin.container.querySelectorAll("[data-testid=pr-delivery]");
    expect(rows).toHaveLength(3);
    expect(rows[1]?.textContent).toContain("전달 내용이 잘못되었습니다: pullRequest.fromRef.latestCommit.");
    cleanup();
    const recon = render(<ReconcilePage />);
    await flush();
    expect(recon.getByTestId("recon-run-error").textContent).toBe("오류: 점검이 한도(5분)보다 오래 걸렸습니다. 발견 사항은 그대로 두었습니다");
    expect(recon.getByTestId("finding-failure").textContent).toBe(" 이유: 제공자 쪽에서 오류가 났습니다 (Coolify, HTTP 502).");
    // The server's English is one fold away, marked as the original.
    expect(recon.container.querySelector("[data-testid=recon-run-state] [data-testid=failure-raw] pre")?.textContent).toBe("context deadline exceeded");
    cleanup();
    const auditPage = render(at("/audit", "/audit", () => <AuditPage />));
    await flush();
    const summaries = [...auditPage.container.querySelectorAll("[data-testid=audit-row]")].map((r) => `${r.getAttribute("data-type")}: ${r.querySelector("[data-testid=audit-summary]")?.textContent}`);
    expect(summaries).toContain("NotificationFailed: 웹훅 2번째 시도 실패: 웹훅 수신 측이 10초 안에 응답하지 않았습니다원문 메시지 (영어)timed out: context deadline exceeded (Client.Timeout exceeded while awaiting headers)");
    // Recorded before the codes: as before, the sentence says the reason is in the folded original.
    expect(summaries).toContain("NotificationFailed: 웹훅 1번째 시도 실패 · HTTP 410 (포기): 이유는 원문 메시지에 있습니다원문 메시지 (영어)HTTP 410");
    expect(summaries).toContain("PRReportFailed: Bitbucket이 풀 리퀘스트 게시를 거부함: API 토큰이 받아들여지지 않았습니다 (Bitbucket)");
  });

  it("names a job's worker by its number, its id kept as the tooltip", async () => {
    const page = render(at(`/jobs/${JOB}`, "/jobs/:id", (p) => <JobPage id={p.id ?? ""} />));
    await flush();
    const attempt = page.getByTestId("attempts").querySelector("li");
    expect(attempt?.textContent).toContain("시도 1 · Slotkeeper 워커 2 · ");
    expect(attempt?.getAttribute("title")).toBe(WORKER);
    const actor = page.container.querySelector(`[data-actor="${WORKER}"]`);
    expect(actor?.textContent).toBe("Slotkeeper 워커 2");
    expect(actor?.getAttribute("title")).toBe(WORKER);
    // The id is in the event's data only, one fold away.
    expect(visibleText(page.container)).not.toContain("build-host-7");
    cleanup();
    const auditPage = render(at("/audit", "/audit", () => <AuditPage />));
    await flush();
    const claimed = auditPage.container.querySelector("[data-type=JobClaimed]");
    expect(claimed?.querySelector(`[data-actor="${WORKER}"]`)?.getAttribute("title")).toBe(WORKER);
    expect(claimed?.textContent).toContain("Slotkeeper 워커 2가 1번째 시도 시작");
    expect(claimed?.textContent).not.toContain("9f2c1ab0");
  });

  it("the check itself catches the server's English left on a page", () => {
    const el = document.createElement("div");
    el.innerHTML = `<p>실패: You are not allowed</p><details><summary>원문</summary><pre>${RAW}</pre></details>`;
    expect(latinWords(visibleText(el), IDS)).toEqual(["You", "are", "not", "allowed"]);
  });
});
