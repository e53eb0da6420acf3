// A provider's error on a Korean page (the audit, the job page, its
// timeline, the failure notice): a Korean sentence built from the failure's
// code and parts comes first; the provider's raw English stays available,
// folded under a label saying whose words they are — never the only text.
// The pages render here with the raw English exactly as the Go engine
// writes it (backend/jobs fromProvider: "<what>: <op> <resource>: <code>
// (HTTP n): <message>"); any English word outside the fold fails.
import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setAuthForTest } from "../auth/session";
import { FailureSentence, failureOf } from "../components/Recovery";
import { JobTimeline } from "../components/JobTimeline";
import { appStatusText } from "../components/AppStatus";
import { actorName, auditSummary, failureText, resourceLabel, workerName } from "../format";
import { AuditPage } from "../pages/AuditPage";
import { JobPage } from "../pages/JobPage";
import type { AuditEntry } from "../services/audit";
import { applySnapshot } from "../live/store";
import { job, jsonResponse, step } from "../test/fakes";
import { latinWords } from "../test/latin";
import { makeT, setLang } from "./index";
import vocabulary from "./vocabulary.json";

const T = makeT("ko");
const JOB = "0f3a9c2e-5b1d-4c8e-9a7f-2d6b8e1c4a50";
const RAW = "delete database db-7f3a: coolify.DeleteDatabase db-7f3a: forbidden (HTTP 403): This token does not have the required permission";
const ARGS = { provider: "coolify", problem: "forbidden", target: "db-7f3a" };
/** Ids and names the pages show as they are. */
const IDS = [JOB, "db-7f3a", "app-1", "dep-9", "v1", "APP_ENV", "alice", "minjun", "dune", "exited:unhealthy", "failed", "w1"];

/** visibleText is what a reader sees without opening a fold: the element's text outside <details> bodies. */
function visibleText(el: HTMLElement): string {
  const copy = el.cloneNode(true) as HTMLElement;
  for (const d of copy.querySelectorAll("details")) for (const c of [...d.childNodes]) if (!(c instanceof HTMLElement && c.tagName === "SUMMARY")) c.remove();
  // Ids in <code> and the event data (JSON) are data.
  for (const c of copy.querySelectorAll("code, pre, script, style")) c.remove();
  return copy.textContent ?? "";
}

beforeEach(() => setLang("ko"));

const flush = () => act(async () => {});

describe("a failure in Korean from its code", () => {
  it("words every failure code and every provider problem of the Go source", () => {
    const args = { volume: "v1", app: "app-1", keys: "APP_ENV", bound: "600", deployment: "dep-9", provider_status: "exited:unhealthy", db: "db-7f3a", target: "db-7f3a" };
    for (const code of vocabulary.failure_codes) {
      if (code === "provider") continue;
      const text = failureText({ code, args }, T);
      expect(text, code).not.toContain("{");
      expect(latinWords(text, IDS), `${code}: ${text}`).toEqual([]);
    }
    for (const problem of vocabulary.failure_problems)
      for (const provider of ["coolify", "bitbucket", "git"]) {
        const text = failureText({ code: "provider", args: { provider, problem, target: "db-7f3a" }, status: 502 }, T);
        expect(text, problem).toMatch(/, HTTP 502\)$/);
        expect(text, problem).not.toContain("원문");
        expect(latinWords(text, IDS), `${problem}: ${text}`).toEqual([]);
      }
  });

  it("says a 403 from Coolify in Korean, with the target and the status", () => {
    expect(failureText({ code: "provider", args: ARGS, status: 403 }, T)).toBe("API 토큰에 이 작업 권한이 없습니다 (Coolify, db-7f3a, HTTP 403)");
    expect(failureText({ code: "provider", args: ARGS }, makeT("en"))).toBe("the API token is not allowed to do this (Coolify, db-7f3a)");
    // A page's lead sentence names no id.
    expect(failureText({ code: "provider", args: ARGS, status: 403, target: false }, makeT("en"))).toBe("the API token is not allowed to do this (Coolify, HTTP 403)");
    // A git remote's URL is not repeated: the step names the repository.
    expect(failureText({ code: "provider", args: { provider: "git", problem: "conflict", target: "https://h/scm/s/r.git" } }, T)).toBe("대상이 그사이 바뀌어 현재 상태와 충돌합니다 (Git)");
    expect(failureText({ code: "not_ready", args: { bound: "600" } }, T)).toBe("대기 한도(10분) 안에 준비되지 않았습니다");
  });

  it("points to the original message, never shows it, when an older event has no code", () => {
    expect(failureText({ raw: RAW }, T)).toBe("이유는 원문 메시지에 있습니다");
  });
});

describe("the audit page in Korean", () => {
  const entries: AuditEntry[] = [
    { position: 3, stream: `job-${JOB}`, type: "JobFailed", slot: "dune", job_id: JOB, actor: "w1", time: "2026-01-01T00:00:02Z", summary: `job failed: ${RAW}`, args: { reason: RAW, error_code: "provider", ...ARGS } },
    { position: 2, stream: `job-${JOB}`, type: "StepFailed", slot: "dune", job_id: JOB, actor: "w1", time: "2026-01-01T00:00:01Z", summary: `delete_db failed (HTTP 403): ${RAW}`, args: { step: "delete_db", status: "403", error: RAW, error_code: "provider", ...ARGS } },
    // From before the codes: the sentence points to the fold.
    { position: 1, stream: "notify", type: "NotificationFailed", slot: "dune", job_id: JOB, actor: "system:notifier", time: "2026-01-01T00:00:00Z", summary: "webhook attempt 1 failed: dial tcp: connection refused", args: { attempt: "1", error: "dial tcp: connection refused" } },
  ];

  beforeEach(() => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () => jsonResponse({ entries })),
    );
    applySnapshot({ position: 3, server_time: "", slots: [] });
  });

  it("says each failure in Korean and folds the provider's English under a Korean label", async () => {
    render(
      <Router hook={memoryLocation({ path: "/audit" }).hook}>
        <AuditPage />
      </Router>,
    );
    await flush();
    const cells = screen.getAllByTestId("audit-summary");
    expect(cells).toHaveLength(3);
    for (const cell of cells) {
      const seen = visibleText(cell);
      expect(latinWords(seen, IDS), seen).toEqual([]);
      // The raw text is there, one click away, marked as English.
      const raw = within(cell).getByTestId("failure-raw");
      expect(raw.tagName).toBe("DETAILS");
      expect(raw.querySelector("pre")?.getAttribute("lang")).toBe("en");
    }
    expect(cells[1].textContent).toContain("API 토큰에 이 작업 권한이 없습니다");
    expect(within(cells[1]).getByTestId("failure-raw").textContent).toContain("제공자의 메시지 (영어 원문)");
    expect(within(cells[1]).getByTestId("failure-raw").textContent).toContain(RAW);
    expect(within(cells[2]).getByTestId("failure-raw").textContent).toContain("원문 메시지 (영어)");
  });
});

describe("the job page of a failed job in Korean", () => {
  const failed = job({
    id: JOB,
    slot: "dune",
    state: "failed",
    steps: [step("delete_db", "failed", { http_status: 403, error: RAW, error_code: "provider", error_args: ARGS, ended_at: "2026-01-01T00:00:01Z" })],
    reason: RAW,
    reason_code: "provider",
    reason_args: ARGS,
    resumable: true,
    cancellable: false,
    attempts: [{ number: 1, worker: "w1", claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:00:30Z", outcome: "failed" }],
    revision: 4,
  });

  beforeEach(() => {
    setAuthForTest({ id: "u-alice", name: "alice", role: "operator" });
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string) => {
        if (url.endsWith("/events"))
          return jsonResponse({
            events: [
              { position: 1, stream: `job-${JOB}`, revision: 0, type: "StepFailed", data: { step: "delete_db", attempt: 1, http_status: 403, error: RAW, error_code: "provider", error_args: ARGS }, meta: null },
              { position: 2, stream: `job-${JOB}`, revision: 1, type: "JobFailed", data: { attempt: 1, reason: RAW, reason_code: "provider", reason_args: ARGS, failed_step: "delete_db" }, meta: null },
            ],
          });
        return jsonResponse(failed);
      }),
    );
  });

  it("leads with a Korean failure sentence; the provider's English only folded", async () => {
    render(
      <Router hook={memoryLocation({ path: `/jobs/${JOB}` }).hook}>
        <Route path="/jobs/:id">{(p) => <JobPage id={p.id} />}</Route>
      </Router>,
    );
    await flush();
    await flush();
    const sentence = screen.getByTestId("failure-sentence").textContent ?? "";
    expect(sentence).toContain("API 토큰에 이 작업 권한이 없습니다 (Coolify, HTTP 403)");
    expect(sentence, "the lead sentence names no id").not.toContain("db-7f3a");
    const page = document.body;
    const seen = visibleText(page);
    expect(seen).not.toContain("This token");
    expect(page.textContent).toContain(RAW);
    expect(screen.getByTestId("failure-details").querySelector("summary")?.textContent).toBe("제공자의 메시지 (영어 원문)");
  });

  it("the timeline row of the failed step says it in Korean, the raw text folded", () => {
    render(<JobTimeline job={failed} events={[]} />);
    fireEvent.click(screen.getByTestId("tl-toggle"));
    const row = screen.getByTestId("tl-failure");
    expect(visibleText(row)).toContain("API 토큰에 이 작업 권한이 없습니다");
    expect(latinWords(visibleText(row), IDS)).toEqual([]);
    expect(within(row).getByTestId("failure-raw").textContent).toContain(RAW);
  });

  it("a failure notice without the job's steps words the failure from the code", () => {
    render(<FailureSentence info={{ jobId: JOB, kind: "reset", state: "failed", completed: [], remaining: [], ...failureOf(failed.steps) }} resumable />);
    expect(latinWords(visibleText(screen.getByTestId("failure")), IDS)).toEqual([]);
  });
});

describe("the server's own actors in an audit line", () => {
  it("are named as in the actor column, without a person's honorific", () => {
    const e = (type: string, args: Record<string, string>): AuditEntry => ({ position: 1, stream: "slot-dune", type, slot: "dune", actor: "system:deadline", time: "2026-01-01T00:00:00Z", summary: "", args });
    expect(auditSummary(e("JobQueued", { kind: "reset", by: "system:deadline" }), T)).toBe("Slotkeeper (기한 타이머)가 초기화 요청");
    expect(auditSummary(e("JobQueued", { kind: "reset", by: "minjun" }), T)).toBe("minjun님이 초기화 요청");
    expect(auditSummary(e("JobQueued", { kind: "reset", by: "system:deadline" }), makeT("en"))).not.toContain("system:");
    // A job's worker is the server's too (found on the walk: "worker:vm:17669/c9bcb67a/0" in the actor column).
    // By its number among its process's workers (counted from 1), not its id: host, process and nonce mean something to an operator only.
    expect(actorName("worker:vm:17669/c9bcb67a/0", T)).toBe("Slotkeeper 워커 1");
    expect(actorName("worker:vm:17669/c9bcb67a/3", makeT("en"))).toBe("Slotkeeper worker 4");
    // An id of another shape (an older log's) is still the server's worker, never shown bare.
    expect(actorName("worker:vm:17669", T)).toBe("Slotkeeper 워커");
    expect(workerName("w1", makeT("en"))).toBe("a Slotkeeper worker");
    // The pull-request flow's actor has a hyphen in its name.
    expect(actorName("system:pull-requests", T)).toBe("Slotkeeper (풀 리퀘스트 흐름)");
    // Found on the walk's audit: the admin command's and the store's own actors.
    expect(actorName("system:cli", T)).toBe("Slotkeeper (명령줄)");
    expect(actorName("system:identity", T)).toBe("Slotkeeper (이벤트 저장소)");
    // A worker in a line (JobClaimed's args) is said the same way.
    expect(auditSummary(e("JobClaimed", { attempt: "1", worker: "worker:vm:17669/c9bcb67a/0" }), T)).toBe("Slotkeeper 워커 1이 1번째 시도 시작");
  });

  it("words a wait's phase and why a session ended, each once (found on the walk: 단계 building, 세션 종료(logout): logout)", () => {
    const e = (type: string, args: Record<string, string>): AuditEntry => ({ position: 1, stream: "x", type, actor: "minjun", time: "2026-01-01T00:00:00Z", summary: "", args });
    expect(auditSummary(e("SessionEnded", { reason: "logout" }), T)).toBe("세션 종료(로그아웃)");
    expect(auditSummary(e("SessionEnded", { reason: "logout" }), makeT("en"))).toBe("Session ended (signed out)");
    expect(auditSummary(e("WaitPhase", { step: "deploy", state: "building", count: "0" }), T)).toBe("배포 후 정상 상태 대기: Coolify 대기, 단계 빌드 (대기열 앞에 0개)");
  });
});

describe("Coolify's status of an application", () => {
  it("is worded in Korean; an unknown one stays Coolify's word", () => {
    expect(appStatusText("running:healthy", false, T)).toBe("실행 중 · 정상");
    expect(appStatusText("running:unknown", true, T)).toBe("실행 중 · 상태 확인 없음");
    expect(appStatusText("exited:unhealthy", false, T)).toBe("중지됨 · 비정상");
    expect(appStatusText("weird:thing", false, T)).toBe("weird:thing");
    expect(appStatusText("running:unknown", true, makeT("en"))).toBe("running · no health check");
  });
});

describe("a described resource", () => {
  it("is not prefixed by a kind its description says already (found on the walk: 볼륨 애플리케이션의 영구 볼륨)", () => {
    expect(resourceLabel({ kind: "volume", id: "a-1", name: "persistent volumes of the application", name_code: "app_volumes" }, T)).toBe("애플리케이션의 영구 볼륨 (a-1)");
    expect(resourceLabel({ kind: "env_var", id: "a-1", name: "env vars of the application", name_code: "app_env_vars" }, makeT("en"))).toBe("env vars of the application (a-1)");
    expect(resourceLabel({ kind: "database", id: "d-1" }, T)).toBe("데이터베이스 (d-1)");
  });
});
