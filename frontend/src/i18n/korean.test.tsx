// Korean, complete (issue 14): every server value the dashboard can show —
// event types, audit summaries, job outcomes, slot state reasons, step
// names, resource kinds, error codes, permissions — taken from
// vocabulary.json (which backend/httpapi/vocabulary_test.go proves is the Go
// source's list) is rendered in Korean, and no rendered text has an English
// word left that is not an id, a name or a product name.
import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { AuditEntry } from "../services/audit";
import { ApiError } from "../services/http";
import { apiErrorText, auditKey, auditSummary, formatTime, reasonText, resourceName, stateReason, stepDetail } from "../format";
import { en } from "./en";
import { makeT, type Key } from "./index";
import { ko } from "./ko";
import vocabulary from "./vocabulary.json";
import { latinWords } from "../test/latin";

const T = makeT("ko");

const ID = "0f3a9c2e-5b1d-4c8e-9a7f-2d6b8e1c4a50";

/** sample gives each audit arg a value the way the server writes it. */
const SAMPLE: Record<string, string> = {
  step: "delete_db",
  kind: "reset",
  outcome: "failed",
  role: "operator",
  resource_kind: "database",
  resource_id: "db-7f3a",
  until: "2026-11-30T08:53:00Z",
  duration: "3600",
  state: "done",
  deadline: "step",
  source: "oidc",
  class: "orphan",
  provider: "coolify",
  by: "minjun",
  who: "seoyeon@example.com",
  worker: "worker-2",
  attempt: "2",
  count: "3",
  position: "1",
  repo: "SLOT/slot-dune",
  name: "ci-token",
  user: "user:7",
  token: "tok-9",
  status: "502",
  absent: "true",
  verify: "true",
  uncertain: "true",
  final: "true",
  resumed: "true",
  reason: "slot is retired",
  reason_code: "slot_is",
  lifecycle: "retired",
  id: "store-3f9c2a7e",
};
const NAMES = [ID, "dune", "minjun", "seoyeon@example.com", "worker-2", "db-7f3a", "SLOT/slot-dune", "ci-token", "user:7", "tok-9", "store-3f9c2a7e"];

function placeholders(s: string): string[] {
  return [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1] ?? "");
}

function entryOf(type: string): AuditEntry {
  const args: Record<string, string> = {};
  for (const p of placeholders(en[auditKey(type) as Key] ?? "")) args[p] = SAMPLE[p] ?? `missing-sample-${p}`;
  for (const f of ["status", "absent", "verify", "uncertain", "final", "resumed", "reason", "reason_code", "lifecycle"]) args[f] = SAMPLE[f] ?? "";
  return { position: 1, stream: `slot-dune`, type, slot: "dune", job_id: ID, actor: "minjun", time: SAMPLE.until ?? "", summary: "English summary", args };
}

describe("the Korean UI has every server value in Korean", () => {
  const lists: [string, readonly string[]][] = [
    ["event", vocabulary.event_types],
    ["audit.ev", [...new Set(vocabulary.event_types.map((v) => auditKey(v).slice("audit.ev.".length)))]],
    ["step", vocabulary.step_names],
    ["kind", vocabulary.job_kinds],
    ["res", vocabulary.resource_kinds],
    ["lifecycle", vocabulary.lifecycles],
    ["state", vocabulary.job_states],
    ["stepstate", vocabulary.step_states],
    ["error", vocabulary.error_codes],
    ["role", vocabulary.roles],
    ["perm", vocabulary.permissions],
  ];
  it.each(lists)("%s.* has a Korean key for every value of the Go source", (prefix, values) => {
    expect(values.length).toBeGreaterThan(0);
    for (const v of values) {
      const key = `${prefix}.${v}`;
      expect(Object.keys(ko), key).toContain(key);
      expect(latinWords(ko[key as Key].replace(/\{\w+\}/g, "")), `ko ${key}: ${ko[key as Key]}`).toEqual([]);
    }
  });

  it("renders every event type's audit summary in Korean, with every part filled and no English left", () => {
    const rows = vocabulary.event_types.map((type) => ({ type, text: auditSummary(entryOf(type), T), label: T.dyn("event", type) }));
    render(
      <ul>
        {rows.map((r) => (
          <li key={r.type} data-testid={r.type}>
            {r.label}: {r.text}
          </li>
        ))}
      </ul>,
    );
    for (const r of rows) {
      const shown = screen.getByTestId(r.type).textContent ?? "";
      expect(shown, r.type).not.toMatch(/\{\w+\}|missing-sample|English summary|undefined/);
      expect(latinWords(shown, NAMES), `${r.type}: ${shown}`).toEqual([]);
    }
  });

  it("words every job outcome and every slot state reason in Korean", () => {
    for (const s of vocabulary.job_states) expect(latinWords(T.dyn("state", s)), s).toEqual([]);
    // Every code the read model writes, with every kind and outcome it can name.
    for (const code of vocabulary.state_reason_codes)
      for (const kind of vocabulary.job_kinds)
        for (const outcome of vocabulary.job_states) {
          const text = stateReason({ state_reason: "English", state_reason_code: code, state_reason_args: { kind, id: ID, outcome } }, T);
          expect(text, code).not.toBe("English");
          expect(latinWords(text, [ID]), `${code}: ${text}`).toEqual([]);
        }
    for (const code of vocabulary.wait_reason_codes) {
      const text = reasonText("English", T, code, "retired");
      expect(text, code).not.toBe("English");
      expect(latinWords(text), `${code}: ${text}`).toEqual([]);
    }
  });

  it("words every API error code in Korean, never the server's English message", () => {
    for (const code of vocabulary.error_codes) {
      const text = apiErrorText(new ApiError(400, code, "slot dune is occupied by bob"), T);
      expect(text, code).not.toContain("occupied");
      expect(latinWords(text), `${code}: ${text}`).toEqual([]);
    }
    expect(apiErrorText(new ApiError(400, "invalid", "bad", { field: "until" }), T)).toContain("until");
    expect(apiErrorText(new ApiError(0, "network", "TypeError: Failed to fetch"), T)).toBe(ko["error.network"]);
    // English keeps the server's precise message after the code's text.
    expect(apiErrorText(new ApiError(409, "conflict", "slot dune is occupied by bob"), makeT("en"))).toBe(
      "This conflicts with the slot's current state. (slot dune is occupied by bob)",
    );
  });

  it("has no English word in any Korean string of the catalogue", () => {
    for (const [k, v] of Object.entries(ko)) {
      const text = v.replace(/\{\w+\}/g, "").replace(/<[^>]*>/g, "");
      expect(latinWords(text), `${k}: ${v}`).toEqual([]);
    }
  });

  it("says the server's descriptive resource names and step details in Korean", () => {
    const args = { branch: "main", template: "TPL/template@main", app: "app-1", deployment: "dep-1", target: "db-1" };
    for (const code of vocabulary.name_codes) {
      const text = resourceName({ kind: "application", id: "a-1", name: "English", name_code: code, name_args: args }, T);
      expect(text, code).not.toBe("English");
      expect(latinWords(text, Object.values(args)), `${code}: ${text}`).toEqual([]);
    }
    expect(resourceName({ kind: "application", id: "a-1", name_code: "list_env_vars" }, T)).toBe("환경 변수 목록");
    expect(resourceName({ kind: "env_var", id: "a-1", name: "DATABASE_URL" }, T)).toBe("DATABASE_URL");
    // Every part a detail code can have (events.Detail* comments), as ids or in words (issue 35).
    const parts = ["names", "app", "repo", "old", "new", "sha", "engine", "name", "id", "keys", "from", "volumes", "skipped", "deployment", "status", "commit", "fqdn", "db", "db_status", "slot", "branch"];
    const detailArgs: Record<string, string> = { count: "3", resource_kind: "env_var", accepted_at: "2026-11-30T08:53:00Z", ...Object.fromEntries(parts.map((p) => [p, ID])) };
    for (const code of vocabulary.detail_codes) {
      const text = stepDetail({ name: "vacate", state: "done", detail: "English", detail_code: code, detail_args: detailArgs }, T);
      expect(text, code).not.toBe("English");
      expect(latinWords(text, [ID]), `${code}: ${text}`).toEqual([]);
    }
  });

  it("fails on a Latin-only string (the check itself works)", () => {
    expect(latinWords("job failed")).toEqual(["job", "failed"]);
    expect(latinWords("dune 슬롯", ["dune"])).toEqual([]);
  });
});

describe("dates read naturally", () => {
  const local = new Date(new Date().getFullYear(), 10, 30, 8, 53, 13).toISOString();
  it("in Korean: 11월 30일 오전 8:53", () => {
    expect(formatTime(local, "ko").replace(/\s+/g, " ")).toBe("11월 30일 오전 8:53");
    expect(formatTime(local, "ko", { seconds: true }).replace(/\s+/g, " ")).toBe("11월 30일 오전 8:53:13");
  });
  it("in English: Nov 30, 8:53 AM", () => {
    expect(formatTime(local, "en").replace(/\s+/g, " ")).toBe("Nov 30, 8:53 AM");
  });
  it("names the year only when it is not this year", () => {
    const old = new Date(2020, 0, 2, 15, 4).toISOString();
    expect(formatTime(old, "ko").replace(/\s+/g, " ")).toBe("2020년 1월 2일 오후 3:04");
  });
});

describe("release says it wipes the slot", () => {
  it("is labelled 반납(초기화) in Korean", () => {
    expect(ko["slot.release"]).toBe("반납(초기화)");
  });
});
