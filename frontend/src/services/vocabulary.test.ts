// The SPA's job lists are the generated ones (frontend/src/generated/
// vocabulary.ts, proven equal to the Go source by backend/httpapi's
// TestVocabularyTSIsGenerated), and each value is one the dictionaries
// translate (vocabulary.json, rendered in Korean by i18n/korean.test.tsx):
// a kind or step added on the server cannot be missing from either.
import vocabulary from "../i18n/vocabulary.json";
import { JOB_KINDS, JOB_STATES, STEP_NAMES, STEP_STATES, TERMINAL_STATES, UNSUCCESSFUL_STATES, RESUMABLE_STATES } from "./jobs";

const sorted = (xs: readonly string[]) => [...xs].sort();

test("the job lists hold every kind, step and state the server has", () => {
  expect(sorted(JOB_KINDS)).toEqual(sorted(vocabulary.job_kinds));
  expect(sorted(STEP_NAMES)).toEqual(sorted(vocabulary.step_names));
  expect(sorted(STEP_STATES)).toEqual(sorted(vocabulary.step_states));
  // vocabulary.json's job states add the read model's "uncertain".
  expect(sorted(JOB_STATES)).toEqual(sorted(vocabulary.job_states.filter((s) => s !== "uncertain")));
});

test("terminal, unsuccessful and resumable states nest", () => {
  for (const s of UNSUCCESSFUL_STATES) expect(TERMINAL_STATES.has(s)).toBe(true);
  for (const s of RESUMABLE_STATES) expect(UNSUCCESSFUL_STATES.has(s)).toBe(true);
  expect(TERMINAL_STATES.has("succeeded") && !UNSUCCESSFUL_STATES.has("succeeded")).toBe(true);
  expect(JOB_STATES.filter((s) => !TERMINAL_STATES.has(s))).toEqual(["queued", "running"]);
});
