import { describe, expect, it } from "vitest";
import { auditSummary, formatDuration, formatGoDuration, formatSpan, goDurationMs, resourceName, stateReason, stepDetail } from "./format";
import { jobTiming, jobTitle, workedMs } from "./components/jobText";
import { makeT } from "./i18n";
import { job } from "./test/fakes";

const en = makeT("en");
const ko = makeT("ko");

describe("durations a person reads (issue 27 item 4)", () => {
  it("a sub-second step is not 'took 0s'", () => {
    expect(formatSpan(800, en)).toBe("800 ms");
    expect(formatSpan(1800, en)).toBe("1.8s");
    expect(formatSpan(1040, en)).toBe("1s");
    expect(formatSpan(2450, ko)).toBe("2.5초");
    expect(formatSpan(65_000, en)).toBe("1m 5s");
  });

  it("Go durations never reach a person", () => {
    expect(goDurationMs("2h0m0s")).toBe(7_200_000);
    expect(goDurationMs("15m0s")).toBe(900_000);
    expect(goDurationMs("1.5s")).toBe(1500);
    expect(goDurationMs("300ms")).toBe(300);
    expect(goDurationMs("7200")).toBe(7_200_000);
    expect(goDurationMs("soon")).toBeUndefined();
    expect(formatGoDuration("2h0m0s", en)).toBe("2h");
    expect(formatGoDuration("6h0m0s", ko)).toBe("6시간");
    expect(formatGoDuration("15m0s", en)).toBe("15m");
    expect(formatGoDuration("1h30m0s", en)).toBe("1h 30m");
    expect(formatDuration(86_400_000, en)).toBe("1d");
  });

  it("a whole number of a unit reads alone, without a zero tail, in en and ko", () => {
    const cases: [number, string, string][] = [
      [5 * 60_000, "5m", "5분"],
      [90_000, "1m 30s", "1분 30초"],
      [60_000, "1m", "1분"],
      [3_600_000, "1h", "1시간"],
      [3_660_000, "1h 1m", "1시간 1분"],
      [2 * 86_400_000, "2d", "2일"],
      [45_000, "45s", "45초"],
      [0, "0s", "0초"],
    ];
    for (const [ms, inEn, inKo] of cases) {
      expect(formatDuration(ms, en)).toBe(inEn);
      expect(formatDuration(ms, ko)).toBe(inKo);
    }
    expect(formatSpan(300_000, ko)).toBe("5분");
    expect(formatGoDuration("5m0s", ko)).toBe("5분");
  });

  it("a job's time counts the grace period apart from the run", () => {
    const j = job({
      state: "succeeded",
      queued_at: "2026-01-01T00:00:00Z",
      not_before: "2026-01-01T00:02:00Z",
      attempts: [{ number: 1, worker: "w1", claimed_at: "2026-01-01T00:02:00.100Z", lease_until: "2026-01-01T00:03:00Z" }],
      ended_at: "2026-01-01T00:02:01.100Z",
    });
    expect(jobTiming(j, 0, en)).toBe("Waited 2m in the grace period · ran 1s");
    expect(jobTiming({ ...j, ended_at: "2026-01-01T00:02:00.900Z" }, 0, ko)).toBe("유예 시간 2분 대기 · 실행 800밀리초");
    expect(jobTiming({ ...j, not_before: j.queued_at }, 0, en)).toBe("Ran 1s");
    expect(jobTiming({ ...j, attempts: [] }, 0, en)).toBe("");
  });

  it("a resumed job's time is the work of its attempts, not the gap between them (issue 35 item 6)", () => {
    const j = job({
      state: "succeeded",
      queued_at: "2026-01-01T00:00:00Z",
      not_before: "2026-01-01T00:00:00Z",
      attempts: [
        { number: 1, worker: "w1", claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:01:00Z", ended_at: "2026-01-01T00:00:00.500Z", outcome: "failed" },
        { number: 2, worker: "w1", claimed_at: "2026-01-01T00:06:10Z", lease_until: "2026-01-01T00:07:00Z" },
      ],
      ended_at: "2026-01-01T00:06:10.500Z",
    });
    expect(workedMs(j, 0)).toBe(1000);
    expect(jobTitle(j, 0, en)).toBe("Reset of s1 — succeeded after 1s");
    expect(jobTiming(j, 0, en)).toBe("Ran 1s · waited 6m 9s between attempts");
  });
});

describe("reason codes (issue 26): sentences come from the dictionaries, never from the server's English", () => {
  const left = { kind: "docker_volume", id: "v1", name: "the server of Coolify application app-1", name_code: "app_server", name_args: { app: "app-1" } };
  it("words where a Docker volume was left in the reader's language, from its code", () => {
    expect(resourceName(left, ko)).toBe("Coolify 애플리케이션 app-1의 서버에 있음");
    expect(resourceName(left, en)).toBe("on the server of Coolify application app-1");
  });

  it("a reworded server sentence changes nothing; a text without a code is shown as the server wrote it", () => {
    expect(resourceName({ ...left, name: "volume left on app-1's host" }, ko)).toBe("Coolify 애플리케이션 app-1의 서버에 있음");
    expect(resourceName({ kind: "docker_volume", id: "v1", name: "the server of Coolify application app-1" }, ko)).toBe(
      "the server of Coolify application app-1",
    );
    expect(stateReason({ state_reason: "reset job j1 (resumed)", state_reason_code: "job_resumed", state_reason_args: { kind: "reset", id: "j1" } }, ko)).toBe(
      `${ko.dyn("kind", "reset")} 작업 j1 (재개됨)`,
    );
    expect(stateReason({ state_reason: "last job failed" }, ko)).toBe("last job failed");
    expect(stepDetail({ name: "vacate", state: "done", detail: "the slot is vacated …", detail_code: "vacate_on_success" }, ko)).toBe(
      "작업 성공이 기록되면 슬롯이 비워집니다.",
    );
    expect(stepDetail({ name: "delete_db", state: "done", detail: "deployment d-1 finished" }, ko)).toBe("deployment d-1 finished");
  });

  it("the waitlist's offer reasons come from their code; an event from before the codes shows its English", () => {
    const e = { position: 1, stream: "waitlist", type: "OfferWithdrawn", time: "2026-01-01T00:00:00Z", summary: "offer withdrawn: slot is retired" };
    const coded = auditSummary({ ...e, args: { reason: "slot is retired", reason_code: "slot_is", lifecycle: "retired" } }, ko);
    expect(coded).toContain(ko("audit.reason.slot_is", { lifecycle: ko.dyn("lifecycle", "retired") }));
    expect(auditSummary({ ...e, args: { reason: "slot is retired" } }, ko)).toContain("slot is retired");
  });

  it("a code whose arguments are missing shows the server's text, never a template with holes", () => {
    expect(stateReason({ state_reason: "last job failed", state_reason_code: "last_job" }, ko)).toBe("last job failed");
  });
});
