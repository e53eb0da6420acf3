// A guard over whole pages: each page the newcomer walk visits (board, slot,
// job, audit, admin, simulator, sign-in) renders in Korean from server
// answers shaped like the real ones — the server's own English in every
// field that carries some (a step's error, a job's reason, a slot's state
// reason, Coolify's app status, an audit summary) — and what a reader sees
// without opening a fold has no Latin-letter word but ids, names and
// product names. A new English string on any of these pages fails here.
import { act, cleanup, render } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { resetAuth, setAuthForTest } from "../auth/session";
import { AdminPage } from "../pages/AdminPage";
import { AuditPage } from "../pages/AuditPage";
import { Board } from "../pages/Board";
import { JobPage } from "../pages/JobPage";
import { SignIn } from "../pages/SignIn";
import { SlotPage } from "../pages/SlotPage";
import { SimulatorPage } from "../sim/SimulatorPage";
import type { AuditEntry } from "../services/audit";
import { resetHealth } from "../live/health";
import { applySnapshot, putJob, resetLiveStore } from "../live/store";
import { stopTicker } from "../live/ticker";
import { job, jsonResponse, slot, step } from "../test/fakes";
import { latinWords } from "../test/latin";
import { setLang } from "./index";

const JOB = "6223df64-dc49-4d70-828d-c4b118db1ebb";
const RAW = "remove the mount of volume data-aurora: coolify.DeleteStorage avo/cbt: forbidden (HTTP 403): You are not allowed to perform this action.";
const ARGS = { provider: "coolify", problem: "forbidden", target: "cbt8eaec3bv1" };

/** Ids, names and values the pages show as they are. */
const IDS = [JOB, "aurora", "birch", "alice", "minjun", "demo-admin", "PRJ/aurora", "PRJ/template", "PRJ/birch", "PRJ", "template", "main", "cbt8eaec3bv1", "a-1", "d-1", "p-1", "w1", "coolify.DeleteStorage", "coolify.DeleteDatabase", "coolify.ListEnvs", "coolify.DeleteEnv", "coolify.ListStorages", "git.ReceivePack", "coolify.DeleteApplication", "bitbucket.DeleteRepo", "coolify.DeleteProject", "bitbucket.GetRepo", "bitbucket.CreateRepo", "DEMO", "webshop", "feature/checkout", "tok-1", "ci"];

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
  attempts: [{ number: 1, worker: "w1", claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:00:30Z", outcome: "failed" }],
  revision: 4,
});

const audit: AuditEntry[] = [
  { position: 5, stream: `job-${JOB}`, type: "JobFailed", slot: "aurora", job_id: JOB, actor: "w1", time: "2026-01-01T00:00:02Z", summary: `job failed: ${RAW}`, args: { reason: RAW, error_code: "provider", ...ARGS } },
  { position: 4, stream: `job-${JOB}`, type: "StepFailed", slot: "aurora", job_id: JOB, actor: "w1", time: "2026-01-01T00:00:02Z", summary: "x", args: { step: "delete_volumes", status: "403", error: RAW, error_code: "provider", ...ARGS } },
  { position: 3, stream: `job-${JOB}`, type: "WaitPhase", slot: "aurora", job_id: JOB, actor: "w1", time: "2026-01-01T00:00:01Z", summary: "x", args: { step: "deploy", state: "building", count: "0" } },
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
        { position: 1, stream: `job-${JOB}`, revision: 0, type: "StepFailed", data: { step: "delete_volumes", attempt: 1, http_status: 403, error: RAW, error_code: "provider", error_args: ARGS }, meta: null },
        { position: 2, stream: `job-${JOB}`, revision: 1, type: "JobFailed", data: { attempt: 1, reason: RAW, reason_code: "provider", reason_args: ARGS, failed_step: "delete_volumes" }, meta: null },
      ],
    });
  if (path.startsWith("/api/jobs/")) return jsonResponse(failed);
  if (path === "/api/audit") return jsonResponse({ entries: audit });
  if (path === "/api/admin/users") return jsonResponse({ users: [{ id: "u-1", name: "demo-admin", role: "admin", created_at: "2026-01-01T00:00:00Z" }] });
  if (path === "/api/admin/tokens") return jsonResponse({ tokens: [{ id: "tok-1", name: "ci", role: "viewer", created_at: "2026-01-01T00:00:00Z", expires_at: "2099-01-01T00:00:00Z" }] });
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
afterEach(() => {
  cleanup();
  resetAuth();
  stopTicker();
  resetLiveStore();
  resetHealth();
  vi.unstubAllGlobals();
  setLang("en");
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
    ["simulator", () => at("/simulator", "/simulator", () => <SimulatorPage />)],
    ["sign-in", () => <SignIn methods={["local", "demo"]} expired={false} />],
  ] as const)("%s has no English a reader sees", async (_name, page) => {
    const { container } = render(page());
    await flush();
    const seen = visibleText(container);
    expect(seen.length).toBeGreaterThan(20);
    expect(latinWords(seen, IDS), seen).toEqual([]);
  });

  it("the check itself catches the server's English left on a page", () => {
    const el = document.createElement("div");
    el.innerHTML = `<p>실패: You are not allowed</p><details><summary>원문</summary><pre>${RAW}</pre></details>`;
    expect(latinWords(visibleText(el), IDS)).toEqual(["You", "are", "not", "allowed"]);
  });
});
