import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import type { Finding, ReconcileReport } from "../services/reconcile";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { applyChange, applySnapshot } from "../live/store";
import { jsonResponse, slot } from "../test/fakes";
import { ReconcilePage, findingURL } from "./ReconcilePage";

const finding = (over: Partial<Finding> = {}): Finding => ({
  run_id: "r1",
  class: "orphan",
  provider: "coolify",
  kind: "application",
  id: "app-stray",
  name: "stray",
  scope: "coolify:proj-1",
  since: "2026-01-01T00:00:00Z",
  ...over,
});

const report = (findings: Finding[], over: Partial<ReconcileReport> = {}): ReconcileReport => ({
  run: {
    id: "r1",
    state: "done",
    started_at: "2026-01-01T00:00:00Z",
    ended_at: "2026-01-01T00:00:05Z",
    scope: ["coolify:proj-1", "bitbucket:SLOT"],
    counts: {},
  },
  findings,
  position: 10,
  links: { coolify: "https://coolify.example", bitbucket: "https://bitbucket.example" },
  ...over,
});

let calls: { method: string; url: string; body?: string }[];
let answers: { report: ReconcileReport; plan: () => Response; adopt: () => Response };
let history: string[];

beforeEach(() => {
  setAuthForTest({ id: "u-olga", name: "olga", role: "operator" }, "csrf-1");
  setLang("en");
  calls = [];
  answers = {
    report: report([
      finding({ class: "drift", kind: "database", id: "db-gone", slot: "s1", detail: "gone at Coolify" }),
      finding(),
      finding({ class: "orphan", provider: "bitbucket", kind: "repository", id: "SLOT/stray-repo", scope: "bitbucket:SLOT" }),
      finding({ class: "unknown", provider: "bitbucket", kind: "project", id: "TPL", scope: "bitbucket:TPL", detail: "could not check: 503" }),
      finding({ class: "resolved", id: "app-old", detail: "was orphan" }),
    ]),
    plan: () =>
      jsonResponse({
        kind: "adopt",
        slot: "s1",
        steps: ["lookup_resource", "adopt_resource"],
        resources: [{ kind: "application", id: "app-stray" }],
        not_before: "2026-01-01T00:00:00Z",
        finding: finding(),
      }),
    adopt: () => jsonResponse({ job_id: "j-adopt", kind: "adopt", slot: "s1", not_before: "", steps: [] }, 202),
  };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? "GET";
      calls.push({ method, url, body: typeof init?.body === "string" ? init.body : undefined });
      if (url.startsWith("/api/reconcile/adopt/plan")) return answers.plan();
      if (url === "/api/reconcile/adopt") return answers.adopt();
      if (url.startsWith("/api/reconcile/delete/plan"))
        return jsonResponse({
          kind: "delete_orphan",
          slot: "s1",
          steps: ["lookup_resource", "adopt_resource", "delete_resource"],
          resources: [{ kind: "repository", id: "SLOT/stray-repo" }],
          not_before: "2026-01-01T00:00:00Z",
          finding: finding(),
        });
      if (url === "/api/reconcile/delete") return jsonResponse({ job_id: "j-del", kind: "delete_orphan", slot: "s1", not_before: "", steps: [] }, 202);
      if (url === "/api/reconcile/run") return jsonResponse({ status: "requested" }, 202);
      return jsonResponse(answers.report);
    }),
  );
  applySnapshot({ position: 5, server_time: "", slots: [slot({ name: "s1" }), slot({ name: "s2", lifecycle: "retired" })] });
});

const flush = () => act(async () => {});

async function mount() {
  const mem = memoryLocation({ path: "/reconcile", record: true });
  history = mem.history;
  render(
    <Router hook={mem.hook}>
      <ReconcilePage />
    </Router>,
  );
  await flush();
}

describe("reconciliation page", () => {
  it("lists findings problems first, with provider links and what each means", async () => {
    await mount();
    const rows = screen.getAllByTestId("finding");
    expect(rows.map((r) => r.dataset.class)).toEqual(["drift", "orphan", "orphan", "unknown", "resolved"]);
    expect(rows[0].textContent).toContain("Tracked, but the provider says it is gone.");
    expect(rows[0].textContent).toContain("Slot: s1.");
    // The reconciler's own words are there, folded under the class's explanation.
    expect(within(rows[3]).getByTestId("failure-raw").querySelector("pre")?.textContent).toBe("could not check: 503");
    expect(within(rows[1]).getByTestId("finding-link").getAttribute("href")).toBe("https://coolify.example/project/proj-1");
    expect(within(rows[2]).getByTestId("finding-link").getAttribute("href")).toBe(
      "https://bitbucket.example/projects/SLOT/repos/stray-repo",
    );
    expect(screen.getByText("4 findings need attention.")).toBeTruthy();
    expect(screen.getByTestId("recon-run-state").dataset.state).toBe("done");
  });

  it("speaks Korean", async () => {
    setLang("ko");
    await mount();
    expect(screen.getByRole("heading", { level: 1 }).textContent).toBe("정합성 점검");
    expect(screen.getAllByTestId("finding")[1].textContent).toContain("제공자에 있지만 어떤 슬롯도 추적하지 않습니다.");
    expect(screen.getAllByTestId("adopt-open")[0].textContent).toBe("슬롯에 편입…");
  });

  it("reloads when a run starts or ends on the live stream, not on a timer", async () => {
    await mount();
    const gets = () => calls.filter((c) => c.url === "/api/reconcile").length;
    expect(gets()).toBe(1);
    // An unrelated change does not reload.
    act(() => {
      applyChange({ position: 6, audit: { position: 6, stream: "slot-s1", type: "SlotOccupied", actor: "a", time: "", summary: "" } });
    });
    await flush();
    expect(gets()).toBe(1);
    answers.report = report([]);
    act(() => {
      applyChange({ position: 7, audit: { position: 7, stream: "reconcile", type: "ReconcileFinished", actor: "a", time: "", summary: "" } });
    });
    await flush();
    expect(gets()).toBe(2);
    expect(screen.queryAllByTestId("finding")).toHaveLength(0);
    expect(screen.getByTestId("recon-clean")).toBeTruthy();
  });

  it("adopts an orphan into a slot through the plan and its confirmation", async () => {
    await mount();
    fireEvent.click(screen.getAllByTestId("adopt-open")[0]);
    const select = screen.getByTestId("adopt-slot") as HTMLSelectElement;
    // A retired slot takes nothing in: it is not offered.
    expect([...select.options].map((o) => o.value)).toEqual(["", "s1"]);
    fireEvent.change(select, { target: { value: "s1" } });
    fireEvent.click(screen.getByTestId("adopt-plan"));
    await flush();
    const plan = calls.find((c) => c.url.startsWith("/api/reconcile/adopt/plan"));
    expect(plan?.url).toBe("/api/reconcile/adopt/plan?slot=s1&provider=coolify&kind=application&id=app-stray");
    expect(screen.getByTestId("plan-steps").textContent).toBe("Check it existsTrack it on the slot");
    expect(calls.some((c) => c.method === "POST")).toBe(false);
    fireEvent.click(screen.getByTestId("confirm"));
    await flush();
    const post = calls.find((c) => c.method === "POST");
    expect(post?.url).toBe("/api/reconcile/adopt");
    expect(JSON.parse(post?.body ?? "{}")).toEqual({ slot: "s1", provider: "coolify", kind: "application", id: "app-stray" });
    expect(history[history.length - 1]).toBe("/jobs/j-adopt");
  });

  it("deletes an orphan through a job charged to a slot, after the plan and its confirmation", async () => {
    await mount();
    const row = screen.getAllByTestId("finding")[2];
    fireEvent.click(within(row).getByTestId("delete-open"));
    expect(within(row).getByTestId("adopt-form").textContent).toContain("never lost");
    fireEvent.change(within(row).getByTestId("adopt-slot"), { target: { value: "s1" } });
    fireEvent.click(within(row).getByTestId("adopt-plan"));
    await flush();
    expect(calls.find((c) => c.url.startsWith("/api/reconcile/delete/plan"))?.url).toBe(
      "/api/reconcile/delete/plan?slot=s1&provider=bitbucket&kind=repository&id=SLOT%2Fstray-repo",
    );
    expect(screen.getByTestId("plan-steps").textContent).toBe("Check it existsTrack it on the slotDelete it and confirm");
    expect(calls.some((c) => c.method === "POST")).toBe(false);
    fireEvent.click(screen.getByTestId("confirm"));
    await flush();
    const post = calls.find((c) => c.method === "POST");
    expect(post?.url).toBe("/api/reconcile/delete");
    expect(JSON.parse(post?.body ?? "{}")).toEqual({ slot: "s1", provider: "bitbucket", kind: "repository", id: "SLOT/stray-repo" });
    expect(history[history.length - 1]).toBe("/jobs/j-del");
  });

  it("shows the server's reason when the finding is stale, and appends nothing", async () => {
    answers.plan = () =>
      jsonResponse(
        {
          error: {
            code: "conflict",
            message: "coolify application app-stray is not an orphan in the latest reconciliation run (a stale finding): run it again",
            details: { reason: "stale_finding" },
          },
        },
        409,
      );
    await mount();
    fireEvent.click(screen.getAllByTestId("adopt-open")[0]);
    fireEvent.change(screen.getByTestId("adopt-slot"), { target: { value: "s1" } });
    fireEvent.click(screen.getByTestId("adopt-plan"));
    await flush();
    expect(screen.getByTestId("confirm-plan").textContent).toContain("a stale finding");
    expect((screen.getByTestId("confirm") as HTMLButtonElement).disabled).toBe(true);
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("offers no actions to a viewer", async () => {
    setAuthForTest({ id: "u-vic", name: "vic", role: "viewer" });
    await mount();
    expect(screen.queryAllByTestId("adopt-open")).toHaveLength(0);
    expect(screen.queryAllByTestId("delete-open")).toHaveLength(0);
    expect(screen.queryByTestId("recon-run")).toBeNull();
  });

  it("words a failed run from its code, in English and Korean, the server's English folded; a run recorded before the codes as before", async () => {
    const failed = (over: Partial<NonNullable<ReconcileReport["run"]>>) => report([], { run: { ...report([]).run!, state: "failed", ...over } });
    answers.report = failed({ error: "context deadline exceeded", error_code: "reconcile_timeout", error_args: { bound: "5m0s" } });
    await mount();
    expect(screen.getByTestId("recon-run-error").textContent).toBe("Error: the check took longer than its bound (5m); the findings were left as they were");
    expect(within(screen.getByTestId("recon-run-state")).getByTestId("failure-raw").querySelector("pre")?.textContent).toBe("context deadline exceeded");
    cleanup();
    setLang("ko");
    answers.report = failed({ error: "abandoned: the run did not finish", error_code: "reconcile_abandoned" });
    await mount();
    expect(screen.getByTestId("recon-run-error").textContent).toBe("오류: 점검이 끝나지 않았습니다. 점검하던 서버가 멈췄고, 다음 점검이 이를 닫았습니다");
    cleanup();
    answers.report = failed({ error: "abandoned: the run did not finish" });
    await mount();
    expect(screen.getByTestId("recon-run-error").textContent).toBe("오류: 이유는 원문 메시지에 있습니다");
    expect(within(screen.getByTestId("recon-run-state")).getByTestId("failure-raw").querySelector("pre")?.textContent).toBe("abandoned: the run did not finish");
  });

  it("says why an unknown finding could not be checked when a provider answered", async () => {
    answers.report = report([finding({ class: "unknown", kind: "project", id: "p-1", detail: "could not check: coolify.ListApplications: unauthorized (HTTP 401)", error_code: "provider", error_args: { provider: "coolify", problem: "unauthorized", status: "401" } })]);
    await mount();
    expect(screen.getByTestId("finding-failure").textContent).toBe(" Why: the API token was not accepted (Coolify, HTTP 401).");
  });

  it("says when no run has happened yet", async () => {
    answers.report = { run: null, findings: [], position: 0 };
    await mount();
    expect(screen.getByTestId("recon-none").textContent).toBe("No reconciliation run yet.");
  });

  it("links only with a configured base URL", () => {
    expect(findingURL(finding(), {})).toBeUndefined();
    expect(findingURL(finding({ kind: "project", id: "p-9" }), { coolify: "https://c" })).toBe("https://c/project/p-9");
    expect(findingURL(finding({ provider: "bitbucket", kind: "project", id: "TPL", scope: "bitbucket:TPL" }), { bitbucket: "https://b" })).toBe(
      "https://b/projects/TPL",
    );
  });
});
