// Korean all the way down (issue 35 item 2): every sentence the server
// writes in English (a vacant slot's readiness, step details, described
// resource names, the waitlist's estimate basis) comes with a code, and a
// Korean page words it from ko.ts. These views carry the server's own
// English next to the codes, exactly as the Go projections write them, so
// a page that shows the English instead of the code's sentence fails here.
import { render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { SlotCard } from "../components/SlotCard";
import { JobTimeline } from "../components/JobTimeline";
import { resourceLabel, stepDetail } from "../format";
import { makeT, setLang } from "./index";
import { job, slot, step } from "../test/fakes";
import vocabulary from "./vocabulary.json";

/** serverEnglish finds the function words of an English sentence: ids and names never are one. */
export function serverEnglish(text: string): string[] {
  return text.match(/\b(the|of|to|is|are|not|and|with|from|its|was|yet|by|for|that|this|has|been)\b/gi) ?? [];
}

const T = makeT("ko");

beforeEach(() => setLang("ko"));

// The English each code stands for, as projections/reduce_job.go writes it.
const STEPS = [
  step("delete_db", "done", { detail: "Coolify's record is gone (GET answers its own 404 after the queued delete); this does not prove the server cleaned up", detail_code: "row_gone_only" }),
  step("delete_env_vars", "running", { detail: "found 3 env_var to delete: APP_ENV, DATABASE_URL, SLOT", detail_code: "listed", detail_args: { count: "3", resource_kind: "env_var", names: "APP_ENV, DATABASE_URL, SLOT" } }),
  step("delete_volumes", "done", { detail: "removed 1 volume mount definition(s) from application app-1", detail_code: "mounts_removed", detail_args: { count: "1", app: "app-1" } }),
  step("force_push_template", "done", { detail: "SLOT/slot-a fb3e3eda → 88f5e614", detail_code: "force_pushed", detail_args: { repo: "SLOT/slot-a", old: "fb3e3eda", new: "88f5e614" } }),
  step("create_db", "done", { detail: "created postgresql database db-a (d38o)", detail_code: "db_created", detail_args: { engine: "postgresql", name: "db-a", id: "d38o" } }),
  step("restore_env", "done", { detail: "env vars are exactly the template's (APP_ENV), verified by listing", detail_code: "env_restored", detail_args: { keys: "APP_ENV", from: "" } }),
  step("create_volumes", "done", { detail: "mounted 1 new, empty volume(s): v1 at /data", detail_code: "volumes_created", detail_args: { count: "1", volumes: "v1 → /data", skipped: "" } }),
  step("deploy", "done", { detail: "deployment dep-1 finished; the application is running:healthy", detail_code: "app_deployed", detail_args: { deployment: "dep-1", status: "running:healthy", commit: "", fqdn: "" } }),
  step("delete_app", "done", { detail: "already absent", detail_code: "already_absent" }),
  step("delete_repo", "running", { detail: "deleting repository SLOT/a (accepted at 2026-01-01T00:00:00Z, not confirmed yet)", detail_code: "deleting", detail_args: { resource_kind: "repository", id: "SLOT/a", accepted_at: "2026-01-01T00:00:00Z" } }),
  step("lookup_repo", "running", { detail: "verifying", detail_code: "verifying" }),
  step("create_repo", "done", { detail: "created P/new", detail_code: "repo_created", detail_args: { repo: "P/new" } }),
  // The StepSucceeded stories, as backend/jobs writes them (issue 35: the deploy step's no-deploy detail was English only).
  step("deploy", "done", { detail: "the template declares no deploy; database d38o is running:healthy", detail_code: "no_deploy_db", detail_args: { db: "d38o", db_status: "running:healthy" } }),
  step("retire", "done", { detail: "every resource is confirmed gone; the slot is retired when the job's success is recorded", detail_code: "retire_on_success" }),
  step("record_repo", "done", { detail: "promoted to P/new; recorded on the slot when the job's success is recorded", detail_code: "promote_on_success", detail_args: { repo: "P/new" } }),
  step("lookup_repo", "done", { detail: "repository P/new does not exist", detail_code: "repo_absent", detail_args: { repo: "P/new" } }),
  step("create_repo", "done", { detail: "adopted P/new (same project and name, empty): it exists after this job's uncertain create", detail_code: "adopted_uncertain", detail_args: { repo: "P/new" } }),
  step("create_repo", "done", { detail: "adopted P/new (same project and name, empty): it answered 409 to this attempt's create: the earlier attempt's create landed after this attempt's lookup", detail_code: "adopted_conflict", detail_args: { repo: "P/new" } }),
  step("lookup_resource", "done", { detail: "database d38o exists at the provider", detail_code: "resource_exists", detail_args: { resource_kind: "database", id: "d38o" } }),
  step("adopt_resource", "done", { detail: "database d38o is now tracked by slot slot-a", detail_code: "resource_adopted", detail_args: { resource_kind: "database", id: "d38o", slot: "slot-a" } }),
  step("push_pr_head", "done", { detail: "pull request head 1a2b3c4d of APP/web on SLOT/a main (was 9f8e7d6c)", detail_code: "pr_head_pushed", detail_args: { sha: "1a2b3c4d", from: "APP/web", repo: "SLOT/a", branch: "main", old: "9f8e7d6c" } }),
];

describe("no server English on a Korean page (issue 35)", () => {
  it("words every step detail code the server sends", () => {
    // Every code the Go source has with parts is one of these fixtures (the rest are fixed sentences, checked in korean.test.tsx).
    const covered = new Set(STEPS.map((s) => s.detail_code));
    for (const code of vocabulary.detail_codes) {
      if (!covered.has(code)) expect(["vacate_on_success", "preflight_passed", "nothing_to_delete", "code_pushed", "db_found", "no_deploy"], code).toContain(code);
    }
    for (const s of STEPS) {
      const text = stepDetail(s, T);
      // Worded from the code (a force push's "repo old → new" reads the same in both languages).
      if (s.detail_code !== "force_pushed") expect(text, s.name).not.toBe(s.detail);
      expect(serverEnglish(text), `${s.detail_code}: ${text}`).toEqual([]);
    }
  });

  it("a never-reset vacant card, its readiness and its occupy button are Korean", () => {
    render(
      <ul>
        <SlotCard
          slot={slot({ name: "cedar", lifecycle: "vacant", occupant: undefined, deadline: undefined, has_template: true, missing: ["not reset to its template yet: it is as it was registered"], missing_code: "never_reset" })}
          onOccupy={() => {}}
        />
      </ul>,
    );
    const text = screen.getByTestId("slot-card").textContent ?? "";
    expect(serverEnglish(text), text).toEqual([]);
    expect(text).not.toMatch(/registered/);
  });

  it("a reset plan's described resources are Korean", () => {
    const r = { kind: "env_var", id: "app-1", name: "env vars of the application", name_code: "app_env_vars" };
    expect(serverEnglish(resourceLabel(r, T))).toEqual([]);
    const v = { kind: "volume", id: "app-1", name: "persistent volumes of the application", name_code: "app_volumes" };
    expect(serverEnglish(resourceLabel(v, T))).toEqual([]);
  });

  it("the job timeline of a reset is Korean, row by row", () => {
    const j = job({ state: "running", steps: STEPS, ended_at: undefined, attempts: [{ number: 1, worker: "w1", claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:01:00Z" }] });
    render(<JobTimeline job={j} events={[]} />);
    const text = screen.getByTestId("job-timeline").textContent ?? "";
    expect(serverEnglish(text), text).toEqual([]);
  });

  it("the check itself catches the server's English", () => {
    expect(serverEnglish("준비 안 됨: not reset to its template yet")).not.toEqual([]);
  });
});
