import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { putSlot, resetLiveStore } from "../live/store";
import { formatTime } from "../format";
import { jsonResponse, slot } from "../test/fakes";
import { SlotPage } from "./SlotPage";

let calls: { method: string; url: string; body?: string; csrf?: string }[];
let postAnswer: (() => Response) | undefined;
let history: string[];

beforeEach(() => {
  setAuthForTest({ id: "user:u-alice", name: "alice", role: "operator" });
  setLang("en");
  calls = [];
  postAnswer = undefined;
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? "GET";
      const headers = (init?.headers ?? {}) as Record<string, string>;
      calls.push({ method, url, body: typeof init?.body === "string" ? init.body : undefined, csrf: headers["X-CSRF-Token"] });
      if (method === "POST" && postAnswer) return postAnswer();
      if (url.includes("/plan")) {
        return jsonResponse({
          kind: "reset",
          slot: "s1",
          steps: ["delete_db", "delete_env_vars", "delete_volumes", "force_push_template", "vacate"],
          resources: [{ kind: "database", id: "d-1" }],
          not_before: "2026-01-01T00:02:00Z",
        });
      }
      if (url.endsWith("/release") && method === "POST") {
        return jsonResponse({ job_id: "j42", kind: "reset", slot: "s1", not_before: "2026-01-01T00:02:00Z", steps: [] }, 202);
      }
      if (url.includes("/jobs")) return jsonResponse({ jobs: [] });
      return jsonResponse(slot());
    }),
  );
  putSlot(slot());
});

function mount() {
  const mem = memoryLocation({ path: "/slots/s1", record: true });
  history = mem.history;
  render(
    <Router hook={mem.hook}>
      <Route path="/slots/:name">{(p) => <SlotPage name={p.name} />}</Route>
      <Route path="/jobs/:id/wait">{(p) => <p data-testid="wait">{p.id}</p>}</Route>
    </Router>,
  );
}

const flush = () => act(async () => {});

describe("slot page", () => {
  it("says when a queued reset starts (issue 27 item 11)", async () => {
    resetLiveStore();
    const notBefore = new Date(Date.now() + 23_000).toISOString();
    putSlot(slot({ position: 9, lifecycle: "resetting", active_job: { id: "j9", kind: "reset", state: "queued", steps_done: 0, steps_total: 5, not_before: notBefore } }));
    mount();
    await flush();
    expect(screen.getByTestId("slot-job-starts").textContent).toMatch(/^starts in 2\ds$/);
    expect(screen.getByTestId("slot-job-starts").querySelector("time")?.getAttribute("datetime")).toBe(notBefore);
  });

  it("lists the slot's resources with their ids", async () => {
    mount();
    await flush();
    const res = screen.getByTestId("resources").textContent ?? "";
    expect(res).toMatch(/Database d-1/);
    expect(res).toMatch(/Application a-1/);
  });

  it("shows the server's plan before releasing, and sends nothing until confirmed", async () => {
    mount();
    await flush();
    fireEvent.click(screen.getByTestId("release"));
    await flush();
    expect(screen.getByTestId("plan-steps").textContent).toMatch(/Delete database.*Mark vacant/);
    expect(screen.getByTestId("plan-resources").textContent).toMatch(/d-1/);
    expect(calls.some((c) => c.method === "POST")).toBe(false);
    fireEvent.click(screen.getByTestId("confirm"));
    await flush();
    expect(calls.filter((c) => c.method === "POST").map((c) => c.url)).toEqual(["/api/slots/s1/release"]);
    expect(history[history.length - 1]).toBe("/jobs/j42/wait");
  });

  it("cancelling the confirmation sends nothing", async () => {
    putSlot(slot({ lifecycle: "vacant", occupant: undefined, deadline: undefined, revision: 9, position: 99 }));
    mount();
    await flush();
    fireEvent.click(screen.getByTestId("teardown"));
    await flush();
    fireEvent.click(screen.getByRole("button", { name: "Cancel" }));
    expect(screen.queryByTestId("confirm-plan")).toBeNull();
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("shows a delete that was accepted but not confirmed as deleting, distinct from the others (issue 12 item 10)", async () => {
    resetLiveStore();
    putSlot(
      slot({
        position: 9,
        resources: [
          { kind: "database", id: "d-1" },
          { kind: "application", id: "a-1" },
          { kind: "env_var", id: "e-1", name: "SECRET_KEY" },
          { kind: "volume", id: "v-1", name: "data" },
        ],
        deleting: [{ kind: "database", id: "d-1", accepted_at: "2026-01-01T00:03:04Z", job_id: "j1" }],
      }),
    );
    mount();
    const db = document.querySelector('[data-resource="database:d-1"]');
    expect(db?.getAttribute("data-deleting")).toBe("true");
    expect(db?.textContent).toMatch(/deleting \(accepted at .+, not confirmed yet\)/);
    for (const other of ["application:a-1", "env_var:e-1", "volume:v-1"]) {
      const li = document.querySelector(`[data-resource="${other}"]`);
      expect(li, other).not.toBeNull();
      expect(li?.getAttribute("data-deleting"), other).toBeNull();
    }
    expect(document.querySelector('[data-resource="env_var:e-1"]')?.textContent).toContain("SECRET_KEY");
    expect(screen.getAllByTestId("deleting")).toHaveLength(1);
    await act(async () => {
      setLang("ko");
    });
    expect(db?.textContent ?? document.querySelector('[data-resource="database:d-1"]')?.textContent).toMatch(/삭제 중/);
  });
});

describe("slot page by role", () => {
  const as = (role: string, name = "alice") => setAuthForTest({ id: `user:u-${name}`, name, role }, "csrf-1");
  const present = () =>
    ["occupy", "extend", "release", "teardown", "promote"].filter((id) => screen.queryByTestId(id) !== null);

  it("an operator occupies for someone chosen from the server's list, sent by subject id (issue 25)", async () => {
    as("operator");
    const vacant = slot({ lifecycle: "vacant", occupant: undefined, deadline: undefined, position: 2, revision: 2 });
    putSlot(vacant);
    const base = (globalThis.fetch as unknown as (u: string, i?: RequestInit) => Promise<Response>).bind(globalThis);
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string, init?: RequestInit) => {
        if (url === "/api/occupants")
          return jsonResponse({ occupants: [{ id: "user:u-alice", name: "alice", kind: "user" }, { id: "token:t-ci", name: "ci", kind: "token" }] });
        if (url.endsWith("/occupy")) {
          calls.push({ method: "POST", url, body: String(init?.body), csrf: undefined });
          return jsonResponse(slot({ occupant: "ci", occupant_id: "token:t-ci" }));
        }
        if (url === "/api/slots/s1") return jsonResponse(vacant);
        return base(url, init);
      }),
    );
    mount();
    await flush();
    const pick = screen.getByTestId("occupy-for") as HTMLSelectElement;
    expect([...pick.options].map((o) => [o.value, o.textContent])).toEqual([
      ["", "me (alice)"],
      ["token:t-ci", "ci (API token)"],
    ]);
    fireEvent.change(pick, { target: { value: "token:t-ci" } });
    fireEvent.click(screen.getByTestId("occupy"));
    await flush();
    const sent = calls.find((c) => c.url.endsWith("/occupy"));
    expect(JSON.parse(sent?.body ?? "{}")).toMatchObject({ by_id: "token:t-ci" });
    expect(JSON.parse(sent?.body ?? "{}").by).toBeUndefined();
  });

  it("a viewer sees no actions and is told why", async () => {
    as("viewer");
    mount();
    await flush();
    expect(present()).toEqual([]);
    expect(screen.getByTestId("read-only").textContent).toMatch(/viewer/);
  });

  it("a retired slot offers nothing, says why without blaming the role, and lists no repository (issue 35 item 6)", async () => {
    as("admin");
    putSlot(slot({ lifecycle: "retired", occupant: undefined, deadline: undefined, revision: 9, position: 99 }));
    mount();
    await flush();
    expect(present()).toEqual([]);
    expect(screen.queryByTestId("read-only")).toBeNull();
    expect(screen.getByTestId("retired-note").textContent).toMatch(/retired/);
    expect(screen.queryByText("Repository")).toBeNull();
  });

  it("a member may extend and release their own slot, but not tear down or promote", async () => {
    as("member");
    mount();
    await flush();
    expect(present()).toEqual(["extend", "release"]);
  });

  it("a member sees nothing to do on someone else's slot", async () => {
    as("member", "bob");
    mount();
    await flush();
    expect(present()).toEqual([]);
  });

  it("an operator releasing someone else's slot must give a reason, which is sent", async () => {
    as("operator", "olga");
    mount();
    await flush();
    // No Teardown on an occupied slot: the server refuses it (issue 35 item 7); the page says why.
    expect(present()).toEqual(["extend", "release", "promote"]);
    expect(screen.getByTestId("teardown-after-release").textContent).toMatch(/release it first/);
    fireEvent.click(screen.getByTestId("release"));
    await flush();
    const confirm = screen.getByTestId("confirm") as HTMLButtonElement;
    expect(screen.getByTestId("confirm-plan").textContent).toMatch(/alice occupies this slot/);
    expect(confirm.disabled).toBe(true);
    fireEvent.change(screen.getByTestId("release-reason"), { target: { value: "  on leave  " } });
    expect(confirm.disabled).toBe(false);
    fireEvent.click(confirm);
    await flush();
    const post = calls.filter((c) => c.method === "POST");
    expect(post).toEqual([{ method: "POST", url: "/api/slots/s1/release", body: '{"reason":"on leave"}', csrf: "csrf-1" }]);
  });

  it("an operator releasing their own slot is not asked for a reason", async () => {
    as("operator");
    mount();
    await flush();
    fireEvent.click(screen.getByTestId("release"));
    await flush();
    expect(screen.queryByTestId("release-reason")).toBeNull();
  });

  it("extend adds the hours to the current deadline, never moving it earlier (issue 14)", async () => {
    // 1 d 6 h left; the default 8 h must give 1 d 14 h, not 8 h from now.
    const deadline = new Date(Date.now() + 30 * 3_600_000).toISOString();
    putSlot(slot({ deadline, revision: 2 }));
    mount();
    await flush();
    expect(screen.getByTestId("extend").textContent).toMatch(/8 h/);
    fireEvent.click(screen.getByTestId("extend"));
    await flush();
    const post = calls.filter((c) => c.method === "POST");
    expect(post.map((c) => c.url)).toEqual(["/api/slots/s1/extend"]);
    const until = Date.parse(JSON.parse(post[0]?.body ?? "{}").until);
    expect(until - Date.parse(deadline)).toBe(8 * 3_600_000);
  });

  it("extend of a slot whose deadline has passed adds to now", async () => {
    const before = Date.now();
    putSlot(slot({ deadline: new Date(before - 3_600_000).toISOString(), revision: 2 }));
    mount();
    await flush();
    fireEvent.click(screen.getByTestId("extend"));
    await flush();
    const post = calls.filter((c) => c.method === "POST");
    const until = Date.parse(JSON.parse(post[0]?.body ?? "{}").until);
    expect(until).toBeGreaterThanOrEqual(before + 8 * 3_600_000);
  });

  it("a release cancelled before it started is shown as nothing changed, in Korean, without a raw reason (issue 14)", async () => {
    setLang("ko");
    putSlot(
      slot({
        revision: 2,
        state_reason: "last job cancelled",
        state_reason_code: "last_job",
        state_reason_args: { outcome: "cancelled" },
        recovery: { job_id: "j8", state: "cancelled", completed_steps: [], remaining: [{ kind: "project", id: "p-1" }, { kind: "application", id: "a-1" }, { kind: "database", id: "d-1" }, { kind: "repository", id: "PRJ/s1" }] },
        latest_jobs: { reset: { id: "j8", kind: "reset", state: "cancelled", steps_done: 0, steps_total: 5 } },
      }),
    );
    mount();
    await flush();
    const page = screen.getByTestId("slot-page").textContent ?? "";
    expect(page).not.toMatch(/last job cancelled/);
    expect(page).not.toMatch(/남은 것|Still there/);
    expect(screen.queryByRole("alert")).toBeNull();
    expect(screen.getByTestId("untouched").textContent).toMatch(/바뀐 것은 없습니다/);
  });

  const incomplete = (state: string, revision = 3) =>
    slot({
      revision,
      lifecycle: "teardown_incomplete",
      occupant: undefined,
      recovery: { job_id: "j7", state, completed_steps: ["delete_db"], uncertain_step: "delete_app", remaining: [{ kind: "application", id: "a-1" }] },
      latest_jobs: { teardown: { id: "j7", kind: "teardown", state, steps_done: 1, steps_total: 4 } },
    });

  it("an incomplete teardown offers Resume on the slot page, which resumes that job (issue 14)", async () => {
    as("operator");
    putSlot(incomplete("failed"));
    postAnswer = () => jsonResponse({ job_id: "j7", kind: "teardown", slot: "s1", not_before: "2026-01-01T00:00:00Z", steps: [] }, 202);
    mount();
    await flush();
    fireEvent.click(screen.getByTestId("resume"));
    await flush();
    expect(calls.filter((c) => c.method === "POST").map((c) => c.url)).toEqual(["/api/jobs/j7/resume"]);
    expect(history[history.length - 1]).toBe("/jobs/j7");
  });

  it("Resume is not offered to a viewer, nor for a job the server will not resume", async () => {
    as("viewer");
    putSlot(incomplete("failed"));
    mount();
    await flush();
    expect(screen.queryByTestId("resume")).toBeNull();
    cleanup();
    as("operator");
    putSlot(
      slot({
        revision: 4,
        recovery: { job_id: "j6", state: "cancelled", completed_steps: ["delete_db"], remaining: [] },
        latest_jobs: { reset: { id: "j6", kind: "reset", state: "cancelled", steps_done: 1, steps_total: 5 } },
      }),
    );
    mount();
    await flush();
    expect(screen.queryByTestId("resume")).toBeNull(); // a cancelled reset is not resumed
  });

  it("a teardown cancelled after it started offers Resume (issue 14)", async () => {
    as("operator");
    putSlot(incomplete("cancelled", 4));
    mount();
    await flush();
    expect(screen.getByTestId("resume")).toBeTruthy();
  });

  it("a refusal names the role and the missing permission", async () => {
    as("member");
    postAnswer = () =>
      jsonResponse({ error: { code: "forbidden", message: "forbidden", details: { permission: "slot.extend" } } }, 403);
    mount();
    await flush();
    fireEvent.click(screen.getByTestId("extend"));
    await flush();
    expect(screen.getByTestId("command-error").textContent).toBe(
      "Not allowed for your role (member): this needs the “extend own slots” permission.",
    );
  });
  it.each(["en", "ko"] as const)("a refused command is worded from its reason and args, not the server's English (%s, issue 26 item 4)", async (lang) => {
    setLang(lang);
    const until = "2026-11-30T08:53:00Z";
    postAnswer = () =>
      jsonResponse(
        {
          error: {
            code: "conflict",
            message: "extend would move the deadline of s1 earlier (now 2026-11-30T08:53:00Z)",
            reason: "deadline_not_later",
            args: { slot: "s1", until },
          },
        },
        409,
      );
    mount();
    await flush();
    fireEvent.click(screen.getByTestId("extend"));
    await flush();
    const text = screen.getByTestId("command-error").textContent ?? "";
    expect(text).toBe(
      lang === "ko"
        ? `연장하면 슬롯 s1의 마감 시각이 앞당겨집니다(현재 ${formatTime(until, "ko")}).`
        : `Extend would move the deadline of s1 earlier (now ${formatTime(until, "en")}).`,
    );
    expect(text).not.toContain(until);
  });
});
