// Refusals by reason (issue 26 item 4): the server sends a reason code with
// string args on every error (backend/apperr/reasons.go, docs/api.md
// "Reasons"); the dashboard says each one from its own dictionaries, never
// from the server's English message.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { apiErrorText, formatGoDuration, formatTime } from "../format";
import { ApiError } from "../services/http";
import { latinWords } from "../test/latin";
import { en } from "./en";
import { makeT, type Key } from "./index";
import { ko } from "./ko";
import vocabulary from "./vocabulary.json";

const root = join(__dirname, "..", "..", "..");

/** The reasons the Go source declares (apperr.Reasons, in the generated vocabulary.json). */
const REASONS: readonly string[] = vocabulary.reasons;

/** Each reason's args as docs/api.md's "Reasons" table lists them (a Go test keeps it equal to reasons.go). */
const DOC_ARGS = new Map<string, string[]>();
for (const m of readFileSync(join(root, "docs/api.md"), "utf8").matchAll(/^\| `(\w+)` \| \d+ \|([^|]*)\|/gm)) {
  DOC_ARGS.set(m[1], [...m[2].matchAll(/`(\w+)`/g)].map((a) => a[1]));
}

const ID = "0f3a9c2e-5b1d-4c8e-9a7f-2d6b8e1c4a50";
/** An arg value the way the server writes it, by name. */
const SAMPLE: Record<string, string> = {
  field: "until",
  until: "2026-11-30T08:53:00Z",
  deadline: "2026-11-30T07:00:00Z",
  held_until: "2026-11-30T09:15:00Z",
  expired_at: "2026-11-30T09:15:00Z",
  max: "168h0m0s",
  duration: "2h0m0s",
  kind: "reset",
  state: "failed",
  project: "proj-7",
  id: "db-7f3a",
  app: "app-9c1",
  repo: "acme/birch",
  slot: "birch",
  value: "acme/birch",
  owner: "aurora",
  job: ID,
  occupant: "bob",
  held_for: "carol",
  what: "slot-dune",
  who: "dave",
  entry_id: "e-42",
  position: "7",
};

function argsOf(reason: string): Record<string, string> {
  const args: Record<string, string> = {};
  for (const a of DOC_ARGS.get(reason) ?? []) args[a] = reason === "position_out_of_range" && a === "max" ? "5" : (SAMPLE[a] ?? "x");
  return args;
}

const refusal = (reason: string, args: Record<string, string>, code = "conflict", message = "slot dune is occupied by bob") =>
  new ApiError(409, code, message, {}, reason, args);

describe("refusal reasons", () => {
  it("reads every reason from the Go source and the docs", () => {
    expect(REASONS.length).toBeGreaterThan(40);
    expect([...DOC_ARGS.keys()].sort()).toEqual([...REASONS].sort());
  });

  it.each(REASONS)("%s has an English and a Korean sentence using only the reason's args", (reason) => {
    const key = `refusal.${reason}` as Key;
    expect(en[key], `en ${reason}`).toBeTruthy();
    expect(ko[key], `ko ${reason}`).toBeTruthy();
    const used = [...en[key].matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    for (const u of used) expect(DOC_ARGS.get(reason), `${reason} {${u}}`).toContain(u);
  });

  it.each(REASONS)("%s in Korean: no English word but the args, no particle pair, not the server's message", (reason) => {
    const args = argsOf(reason);
    const text = apiErrorText(refusal(reason, args), makeT("ko"));
    expect(text).toBe(apiErrorText(refusal(reason, args), makeT("ko"))); // deterministic
    expect(text).not.toContain("occupied");
    expect(text, "said from the reason, not the code").not.toBe(ko["error.conflict"]);
    expect(text).not.toMatch(/\{\w+\}/);
    expect(text).not.toMatch(/을\(를\)|이\(가\)|은\(는\)|과\(와\)|\(으\)로/);
    expect(latinWords(text, Object.values(args)), `${reason}: ${text}`).toEqual([]);
  });

  it("formats args by kind: instants, durations, lifecycles and job states in the reader's words", () => {
    const k = makeT("ko");
    const e = makeT("en");
    const until = "2026-11-30T08:53:00Z";
    expect(apiErrorText(refusal("deadline_not_later", { slot: "birch", until }), k)).toBe(
      `연장하면 슬롯 birch의 마감 시각이 앞당겨집니다(현재 ${formatTime(until, "ko")}).`,
    );
    expect(apiErrorText(refusal("deadline_not_later", { slot: "birch", until }), e)).toBe(
      `Extend would move the deadline of birch earlier (now ${formatTime(until, "en")}).`,
    );
    expect(apiErrorText(refusal("until_too_far", { field: "until", until, max: "168h0m0s" }), k)).toContain(formatGoDuration("168h0m0s", k));
    expect(apiErrorText(refusal("position_out_of_range", { field: "position", position: "7", max: "5" }), e)).toBe(
      "Position 7 is out of range: use 1 to 5.",
    );
    // A slot's state is a lifecycle; a job's a job state.
    expect(apiErrorText(refusal("slot_locked", { slot: "birch", job: "j1", kind: "reset", state: "resetting" }), k)).toBe(
      "슬롯 birch는 작업 j1이 잠그고 있습니다(초기화, 상태: 초기화 중).",
    );
    expect(apiErrorText(refusal("job_ended", { job: "j1", state: "cancelled" }), k)).toBe("작업 j1은 이미 끝났습니다(취소됨).");
    expect(apiErrorText(refusal("job_ended", { job: "j1", state: "cancelled" }), e)).toBe("Job j1 has already ended (Cancelled).");
    // invalid_field does not say what is wrong: English keeps the server's words.
    expect(apiErrorText(new ApiError(400, "invalid", "limit must be 1..100", { field: "limit" }, "invalid_field", { field: "limit" }), e)).toBe(
      "The request is not valid: check “limit”. (limit must be 1..100)",
    );
    // Particles follow the filled-in name: 받침 or not.
    expect(apiErrorText(refusal("slot_retired", { slot: "slot-2" }), k)).toBe("슬롯 slot-2는 폐기되었습니다.");
    expect(apiErrorText(refusal("slot_retired", { slot: "slot-1" }), k)).toBe("슬롯 slot-1은 폐기되었습니다.");
  });

  it("falls back to the code's sentence, then the server's message, for a reason it does not know", () => {
    const k = makeT("ko");
    const e = makeT("en");
    // A newer server's reason: the code's sentence.
    expect(apiErrorText(refusal("slot_on_fire", { slot: "birch" }), k)).toBe(ko["error.conflict"]);
    expect(apiErrorText(refusal("slot_on_fire", { slot: "birch" }), e)).toBe(`${en["error.conflict"]} (slot dune is occupied by bob)`);
    // A reason whose sentence needs an arg the answer lacks or left empty: the same.
    expect(apiErrorText(refusal("slot_locked", { slot: "birch" }), k)).toBe(ko["error.conflict"]);
    expect(apiErrorText(refusal("changed_concurrently", { what: "" }), k)).toBe(ko["error.conflict"]);
    // The code is the reason when there is none of its own.
    expect(apiErrorText(refusal("internal", {}, "internal", "boom"), k)).toBe(ko["error.internal"]);
    // An unknown code too: the status and the server's message.
    expect(apiErrorText(new ApiError(418, "teapot", "I am a teapot", {}, "teapot"), k)).toBe(`${ko["error.unknown"].replace("{status}", "418")} (I am a teapot)`);
  });
});
