// The pull-request flow on the dashboard (issue 34): the PR on a slot's
// card and page, the admin page's repositories and deliveries, and the
// Simulator page's "open a pull request" with merge and decline.
import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setAuthForTest } from "../auth/session";
import { SlotCard } from "../components/SlotCard";
import { makeT, setLang } from "../i18n";
import { applyChange, applySnapshot, getLiveState, noteDeliveries, putPRs, putSlot } from "../live/store";
import { latinWords } from "../test/latin";
import { job, jsonResponse, slot, step } from "../test/fakes";
import vocabulary from "../i18n/vocabulary.json";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { JobPage } from "../pages/JobPage";
import { formatDuration, stepDetail } from "../format";
import type { PRView } from "../services/pullrequests";
import { WaitingPRs } from "./WaitingPRs";
import { AdminPullRequests, deliveryReason } from "./AdminPullRequests";
import { PRPushes, PullRequestInfo, prCommit } from "./PullRequestInfo";
import { SimPullRequests } from "./SimPullRequests";

/** serverEnglish finds the function words of an English sentence (as i18n/serverEnglish.test.tsx). */
const serverEnglish = (text: string) => text.match(/\b(the|of|to|is|are|not|and|with|from|its|was|yet|by|for|that|this|has|been)\b/gi) ?? [];

const HEAD = "1111111111111111111111111111111111111111";
const HEAD2 = "2222222222222222222222222222222222222222";
const pr = {
  repo: { project: "DEMO", slug: "webshop" },
  id: 3,
  title: "Faster checkout",
  author: "Dana Developer",
  branch: "feature/checkout",
  link: "http://bitbucket.test/projects/DEMO/repos/webshop/pull-requests/3",
  head: HEAD,
  job_id: "j-pr-1",
};
const held = slot({
  name: "cedar",
  occupant: "Dana Developer",
  occupant_id: "bitbucket:dana",
  occupied_at: "2026-12-07T10:00:00Z",
  pull_request: pr,
  deployed: { fqdn: "http://cedar.test", status: "running:healthy", commit: HEAD, job_id: "j-pr-1", deployed_at: "2026-12-07T10:01:00Z" },
});

interface Call {
  method: string;
  url: string;
  body: unknown;
}
let calls: Call[];
let route: (method: string, url: string, body: unknown) => Response | undefined;

beforeEach(() => {
  setLang("en");
  setAuthForTest({ id: "user:u-root", name: "root", role: "admin" });
  calls = [];
  route = () => undefined;
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? "GET";
      const body: unknown = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
      calls.push({ method, url, body });
      return route(method, url, body) ?? jsonResponse({ error: { code: "not_found", message: "no" } }, 404);
    }),
  );
});

describe("a slot held by a pull request", () => {
  it("shows the PR on the board card: title, author, branch, link and the commit it runs", () => {
    render(
      <ul>
        <SlotCard slot={held} />
      </ul>,
    );
    const box = screen.getByTestId("slot-pr");
    expect(box.dataset.pr).toBe("DEMO/webshop#3");
    expect(box.textContent).toContain("Faster checkout");
    expect(screen.getByTestId("slot-pr-author").textContent).toContain("Dana Developer");
    expect(screen.getByTestId("slot-pr-branch").textContent).toContain("feature/checkout");
    expect(screen.getByTestId("slot-pr-commit").textContent).toContain(HEAD.slice(0, 12));
    const a = screen.getByTestId("slot-pr-link") as HTMLAnchorElement;
    expect(a.href).toBe(pr.link);
    expect(a.rel).toContain("noopener");
  });

  it("says which head is being deployed while the PR's job runs, and never links a javascript: URL", () => {
    const pushing = { ...held, pull_request: { ...pr, head: HEAD2, job_id: "j-pr-2", link: "javascript:alert(1)" }, active_job: { id: "j-pr-2", kind: "pr_deploy", state: "running", steps_done: 0, steps_total: 2 } };
    expect(prCommit(pushing)).toEqual({ runs: HEAD, deploying: HEAD2 });
    render(<PullRequestInfo slot={pushing} />);
    expect(screen.getByTestId("slot-pr-commit").dataset.deploying).toBe(HEAD2);
    expect(screen.getByTestId("slot-pr-commit").textContent).toContain(`deploying ${HEAD2.slice(0, 12)}`);
    expect(screen.queryByTestId("slot-pr-link")).toBeNull();
    expect(prCommit({ ...held, pull_request: undefined })).toEqual({});
  });

  it("shows nothing for a slot no pull request holds", () => {
    render(<PullRequestInfo slot={slot()} />);
    expect(screen.queryByTestId("slot-pr")).toBeNull();
  });

  it("lists the PR's pr_deploy jobs on the slot page, linking to their job pages", async () => {
    route = (m, url) =>
      m === "GET" && url.startsWith("/api/slots/cedar/jobs?")
        ? jsonResponse({
            jobs: [
              job({ id: "j-pr-2", kind: "pr_deploy", slot: "cedar", state: "running", requested_by: "bitbucket", params: { head: HEAD2 }, queued_at: "2026-12-07T10:05:00Z" }),
              job({ id: "j-pr-1", kind: "pr_deploy", slot: "cedar", state: "succeeded", requested_by: "bitbucket", params: { head: HEAD }, queued_at: "2026-12-07T10:00:01Z" }),
              job({ id: "j-old", kind: "pr_deploy", slot: "cedar", state: "succeeded", requested_by: "bitbucket", params: { head: HEAD }, queued_at: "2026-12-06T10:00:01Z" }),
            ],
          })
        : undefined;
    render(<PRPushes slot={held} />);
    const rows = await screen.findAllByTestId("pr-push");
    expect(rows.map((r) => r.dataset.job)).toEqual(["j-pr-2", "j-pr-1"]); // an earlier PR's push is not this one's
    expect(within(rows[0]!).getByRole("link").getAttribute("href")).toContain("/jobs/j-pr-2");
    expect(calls[0]?.url).toContain("kind=pr_deploy");
  });

  it("is Korean on a Korean page", () => {
    setLang("ko");
    render(
      <ul>
        <SlotCard slot={held} />
      </ul>,
    );
    const text = screen.getByTestId("slot-pr").textContent ?? "";
    expect(serverEnglish(text.replace("Faster checkout", "")), text).toEqual([]);
    expect(text).toContain("작성자");
  });
});

describe("the admin page's pull-request part", () => {
  const deliveries = [
    { time: "2026-12-07T10:02:00Z", request_id: "r-3", event_key: "pr:opened", repo: "DEMO/webshop", pr: 3, result: "duplicate", reason: "request r-3 was received already", reason_code: "request_seen", reason_args: { request: "r-3" } },
    { time: "2026-12-07T10:01:00Z", event_key: "pr:opened", result: "refused", reason: "the X-Hub-Signature does not match the body under the configured webhook secret", reason_code: "bad_signature" },
    { time: "2026-12-07T10:00:00Z", request_id: "r-1", event_key: "pr:opened", repo: "DEMO/webshop", pr: 3, result: "accepted" },
  ];
  let repos: { project: string; slug: string }[];
  beforeEach(() => {
    repos = [{ project: "DEMO", slug: "webshop" }];
    route = (m, url, body) => {
      if (url === "/api/pr-repos" && m === "GET") return jsonResponse({ repos });
      if (url === "/api/pr-repos" && m === "POST") {
        const [project, slug] = (body as { repo: string }).repo.split("/");
        repos = [...repos, { project: project!.toUpperCase(), slug: slug! }];
        return jsonResponse({ repo: repos.at(-1) }, 201);
      }
      if (url === "/api/pr-repos/DEMO/webshop" && m === "DELETE") {
        repos = [];
        return new Response(null, { status: 204 });
      }
      if (url === "/api/hooks/bitbucket/deliveries") return jsonResponse({ deliveries });
      return undefined;
    };
  });

  it("links and unlinks repositories through the API", async () => {
    render(<AdminPullRequests />);
    expect((await screen.findAllByTestId("pr-repo-row")).map((r) => r.dataset.repo)).toEqual(["DEMO/webshop"]);
    fireEvent.change(screen.getByTestId("pr-repo"), { target: { value: "apps/shop" } });
    await act(async () => fireEvent.submit(screen.getByTestId("pr-link").closest("form")!));
    expect(calls.find((c) => c.method === "POST")?.body).toEqual({ repo: "apps/shop" });
    await screen.findByText("APPS/shop");
    fireEvent.click(within(screen.getAllByTestId("pr-repo-row")[0]!).getByTestId("pr-unlink"));
    await act(async () => fireEvent.click(screen.getByTestId("pr-unlink-confirm")));
    expect(calls.some((c) => c.method === "DELETE" && c.url === "/api/pr-repos/DEMO/webshop")).toBe(true);
  });

  it("lists the deliveries newest first, each result and reason worded from its code", async () => {
    render(<AdminPullRequests />);
    const rows = await screen.findAllByTestId("pr-delivery");
    expect(rows.map((r) => r.dataset.result)).toEqual(["duplicate", "refused", "accepted"]);
    expect(rows[0]!.textContent).toContain("This delivery (request r-3) was received already.");
    expect(rows[1]!.textContent).toContain("Refused");
    expect(rows[0]!.textContent).toContain("DEMO/webshop");
    expect(rows[0]!.textContent).toContain("#3");
  });

  it("loads the deliveries again, without a click, each time the stream says one was recorded", async () => {
    render(<AdminPullRequests />);
    expect(await screen.findAllByTestId("pr-delivery")).toHaveLength(3);
    const loads = () => calls.filter((c) => c.url === "/api/hooks/bitbucket/deliveries").length;
    expect(loads()).toBe(1);
    deliveries.unshift({ time: "2026-12-07T10:03:00Z", request_id: "r-4", event_key: "pr:merged", repo: "DEMO/webshop", pr: 3, result: "accepted" });
    await act(async () => noteDeliveries());
    const rows = await screen.findAllByTestId("pr-delivery");
    expect(rows).toHaveLength(4);
    expect(rows[0]!.textContent).toContain("pr:merged");
    expect(loads()).toBe(2);
    deliveries.shift();
  });

  it("says every delivery reason code in Korean, never the server's English", () => {
    const T = makeT("ko");
    const args = { key: "repo:refs_changed", field: "pullRequest.id", repo: "DEMO/webshop", request: "r-1", state: "MERGED", head: HEAD, date: "2026-12-07T09:00:00+09:00", max_age: "15m0s" };
    for (const code of vocabulary.delivery_reason_codes) {
      const text = deliveryReason({ reason: "English", reason_code: code, reason_args: args }, T);
      expect(text, code).not.toBe("English");
      expect(latinWords(text, Object.values(args).concat(HEAD.slice(0, 12))), `${code}: ${text}`).toEqual([]);
    }
    expect(deliveryReason({ reason: "the pull request is merged already", reason_code: "pr_closed", reason_args: { state: "MERGED" } }, makeT("en"))).toBe("The pull request is merged already.");
  });
});

describe("the Simulator page's pull requests", () => {
  it("opens a PR in the simulated Bitbucket, has the server deliver it, then merges it", async () => {
    const delivery = (id: number, key: string) => ({ id, head: HEAD, event_key: key, request_id: `req-${key}`, payload: { eventKey: key } });
    route = (m, url, body) => {
      if (m === "POST" && url === "/api/sim/pull-requests") return jsonResponse(delivery(3, "pr:opened"), 201);
      if (m === "POST" && url === "/api/sim/pull-requests/DEMO/webshop/3/merge") return jsonResponse(delivery(3, "pr:merged"), 201);
      if (m === "POST" && url === "/api/hooks/bitbucket/simulated") return jsonResponse({ result: "accepted" }, 202);
      void body;
      return undefined;
    };
    render(<SimPullRequests />);
    fireEvent.change(screen.getByTestId("prsim-branch"), { target: { value: "feature/x" } });
    await act(async () => fireEvent.submit(screen.getByTestId("prsim-open").closest("form")!));
    expect(calls[0]).toMatchObject({ method: "POST", url: "/api/sim/pull-requests", body: { project: "DEMO", repo: "webshop", branch: "feature/x" } });
    // The answered delivery goes to the server as it came: the server signs it.
    expect(calls[1]).toMatchObject({ method: "POST", url: "/api/hooks/bitbucket/simulated", body: delivery(3, "pr:opened") });
    expect((await screen.findByTestId("prsim-outcome")).dataset.result).toBe("accepted");
    const row = screen.getByTestId("prsim-pr");
    expect(row.dataset.pr).toBe("DEMO/webshop#3");
    expect(row.dataset.slot).toBeUndefined(); // waiting until the slot view says it holds one

    act(() => putSlot(held));
    expect(screen.getByTestId("prsim-pr").dataset.slot).toBe("cedar");
    await act(async () => fireEvent.click(screen.getByTestId("prsim-merge")));
    expect(calls.slice(2).map((c) => c.url)).toEqual(["/api/sim/pull-requests/DEMO/webshop/3/merge", "/api/hooks/bitbucket/simulated"]);
  });

  it("opens a PR from a fork when the fork's project is given", async () => {
    route = (m, url) => {
      if (m === "POST" && url === "/api/sim/pull-requests") return jsonResponse({ id: 4, head: HEAD, event_key: "pr:opened", request_id: "r4", payload: {} }, 201);
      if (m === "POST" && url === "/api/hooks/bitbucket/simulated") return jsonResponse({ result: "accepted" }, 202);
      return undefined;
    };
    render(<SimPullRequests />);
    fireEvent.change(screen.getByTestId("prsim-fork"), { target: { value: " ~dana " } });
    await act(async () => fireEvent.submit(screen.getByTestId("prsim-open").closest("form")!));
    expect(calls[0]).toMatchObject({ method: "POST", url: "/api/sim/pull-requests", body: { project: "DEMO", repo: "webshop", branch: "feature/checkout", fork: "~dana" } });
    expect((await screen.findByTestId("prsim-outcome")).dataset.result).toBe("accepted");
    expect(screen.getByTestId("prsim-pr").dataset.pr).toBe("DEMO/webshop#4");
  });

  it("says when the repository is not linked", async () => {
    route = (m, url) => {
      if (url === "/api/sim/pull-requests") return jsonResponse({ id: 1, head: HEAD, event_key: "pr:opened", request_id: "r", payload: {} }, 201);
      if (url === "/api/hooks/bitbucket/simulated") return jsonResponse({ result: "ignored", reason: "repository DEMO/webshop is not linked", reason_code: "repo_unlinked", reason_args: { repo: "DEMO/webshop" } });
      void m;
      return undefined;
    };
    render(<SimPullRequests />);
    await act(async () => fireEvent.submit(screen.getByTestId("prsim-open").closest("form")!));
    const out = await screen.findByTestId("prsim-outcome");
    expect(out.dataset.code).toBe("repo_unlinked");
    expect(out.textContent).toContain("Link it on the Administration page");
    expect(screen.queryByTestId("prsim-pr")).toBeNull();
  });
});

describe("the job page of a pr_deploy job", () => {
  it("reads well in Korean: its kind, its two steps, the head it deploys and the push's detail", async () => {
    setLang("ko");
    const pushed = step("push_pr_head", "done", {
      detail: `pull request head 1111111 of DEMO/webshop on SLOT/slot-cedar main (was 9f8e7d6c)`,
      detail_code: "pr_head_pushed",
      detail_args: { sha: "11111111", from: "DEMO/webshop", repo: "SLOT/slot-cedar", branch: "main", old: "9f8e7d6c" },
    });
    const j = job({ id: "j-pr", kind: "pr_deploy", slot: "cedar", state: "succeeded", requested_by: "bitbucket", params: { pr_source: "DEMO/webshop", pr_branch: "feature/checkout", head: HEAD }, steps: [pushed, step("deploy", "done")], cancellable: false, ended_at: "2026-01-01T00:00:04Z" });
    route = (_m, url) => (url.endsWith("/events") ? jsonResponse({ events: [] }) : url.startsWith("/api/jobs/j-pr") ? jsonResponse(j) : undefined);
    const mem = memoryLocation({ path: "/jobs/j-pr" });
    render(
      <Router hook={mem.hook}>
        <Route path="/jobs/:id">{(p) => <JobPage id={p.id} />}</Route>
      </Router>,
    );
    const page = await screen.findByTestId("job-page");
    await act(async () => {});
    const text = page.textContent ?? "";
    expect(text).toContain("풀 리퀘스트 배포");
    expect(text).toContain("풀 리퀘스트 헤드 푸시");
    expect(screen.getByTestId("job-pr-head").textContent).toContain(HEAD.slice(0, 12));
    expect(serverEnglish(text), text).toEqual([]);
    const said = stepDetail(pushed, makeT("ko"));
    expect(said).toBe("DEMO/webshop의 풀 리퀘스트 헤드 11111111을 SLOT/slot-cedar main에 푸시함 (이전 9f8e7d6c)");
    expect(stepDetail(pushed, makeT("en"))).toBe("pull request head 11111111 from DEMO/webshop on SLOT/slot-cedar main (was 9f8e7d6c)");
  });
});

describe("the board's pull requests waiting for a slot", () => {
  const NOW = Date.parse("2026-12-07T10:30:00Z");
  const view = (id: number, over: Partial<PRView> = {}): PRView => ({
    stream: `pr-DEMO-webshop-${id}`,
    repo: { project: "DEMO", slug: "webshop" },
    id,
    title: `Change ${id}`,
    author: "Dana Developer",
    branch: `feature/${id}`,
    link: `http://bitbucket.test/pr/${id}`,
    head: HEAD,
    state: "OPEN",
    opened_at: "2026-12-07T10:00:00Z",
    updated_at: "2026-12-07T10:00:00Z",
    position: 10 + id,
    ...over,
  });
  // PR 5 opened after PR 4 but waits longer: the order is the wait's (waiting_position).
  const list = [
    view(5, { waiting_since: "2026-12-07T10:15:00Z", waiting_position: 20, position: 20 }),
    view(4, { waiting_since: "2026-12-07T10:20:00Z", waiting_position: 30, position: 30 }),
    view(3, { slot: "cedar", job_id: "j-pr-1" }),
    view(2, { state: "MERGED", slot: "oak", released: true }),
  ];
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(NOW);
    route = (m, url) => (m === "GET" && url === "/api/pull-requests" ? jsonResponse({ pull_requests: [list[1], list[3], list[0], list[2]], position: 40 }) : undefined);
  });

  const items = () => screen.queryAllByTestId("pr-waiting-item").map((i) => i.dataset.pr);

  it("lists them in the order they will be served, each with how long it has waited, and follows the stream live", async () => {
    applySnapshot({ position: 40, server_time: "", slots: [] });
    render(<WaitingPRs />);
    expect(await screen.findAllByTestId("pr-waiting-item")).toHaveLength(2);
    expect(items()).toEqual(["DEMO/webshop#5", "DEMO/webshop#4"]);
    expect(calls.filter((c) => c.url === "/api/pull-requests")).toHaveLength(1);
    const T = makeT("en");
    const ages = screen.getAllByTestId("pr-waiting-age").map((a) => a.textContent);
    expect(ages).toEqual([`waiting ${formatDuration(15 * 60_000, T)}`, `waiting ${formatDuration(10 * 60_000, T)}`]);
    expect(screen.getByTestId("pr-waiting").textContent).toContain("Pull requests waiting for a slot (2)");
    expect(screen.getAllByTestId("pr-waiting-item")[0]!.querySelector("a")?.getAttribute("href")).toBe("http://bitbucket.test/pr/5");

    // PR 5 takes a freed slot: the change carries its view, and it leaves the list.
    act(() => {
      applyChange({ position: 41, pull_request: view(5, { slot: "oak", position: 41 }) });
    });
    expect(items()).toEqual(["DEMO/webshop#4"]);
    // A new PR starts waiting: it joins at the end.
    act(() => {
      applyChange({ position: 42, pull_request: view(6, { waiting_since: "2026-12-07T10:29:00Z", waiting_position: 42, position: 42 }) });
    });
    expect(items()).toEqual(["DEMO/webshop#4", "DEMO/webshop#6"]);
    // An older REST answer does not undo what the stream brought.
    act(() => putPRs(list));
    expect(items()).toEqual(["DEMO/webshop#4", "DEMO/webshop#6"]);
    expect(getLiveState().prs.get("pr-DEMO-webshop-5")?.slot).toBe("oak");
    // PR 4 is merged while waiting: none but 6 is left.
    act(() => {
      applyChange({ position: 43, pull_request: view(4, { state: "MERGED", position: 43 }) });
    });
    expect(items()).toEqual(["DEMO/webshop#6"]);
  });

  it("loads the list again after a snapshot (the stream could not resume), and shows nothing while none waits", async () => {
    route = (m, url) => (m === "GET" && url === "/api/pull-requests" ? jsonResponse({ pull_requests: [list[2]!], position: 40 }) : undefined);
    render(<WaitingPRs />);
    await act(async () => {});
    expect(screen.queryByTestId("pr-waiting")).toBeNull();
    route = (m, url) => (m === "GET" && url === "/api/pull-requests" ? jsonResponse({ pull_requests: list, position: 50 }) : undefined);
    act(() => {
      applySnapshot({ position: 50, server_time: "", slots: [] });
    });
    expect(await screen.findAllByTestId("pr-waiting-item")).toHaveLength(2);
    expect(calls.filter((c) => c.url === "/api/pull-requests")).toHaveLength(2);
  });

  it("is Korean on a Korean page", async () => {
    setLang("ko");
    render(<WaitingPRs />);
    await screen.findAllByTestId("pr-waiting-item");
    const text = (screen.getByTestId("pr-waiting").textContent ?? "").replace(/Change \d|Dana Developer|feature\/\d|DEMO\/webshop#\d/g, "");
    expect(serverEnglish(text), text).toEqual([]);
    expect(latinWords(text, []), text).toEqual([]);
    expect(text).toContain("슬롯을 기다리는 풀 리퀘스트 (2)");
  });
});
