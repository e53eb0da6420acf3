// One colour per state, everywhere (issue 35): every lifecycle, job state
// and step state maps to one tone (ui/tokens.css), and its word comes from
// the dictionaries (t.dyn). Board, lists, job page and phone all ask here.

/** Tone is a kind of state; tokens.css gives each one colour. */
export type Tone = "free" | "taken" | "busy" | "wait" | "done" | "attention" | "soon" | "off";

const SLOT: Record<string, Tone> = {
  vacant: "free",
  occupied: "taken",
  resetting: "busy",
  tearing_down: "busy",
  promoting: "busy",
  teardown_incomplete: "attention",
  retired: "off",
};

const JOB: Record<string, Tone> = {
  queued: "wait",
  running: "busy",
  succeeded: "done",
  failed: "attention",
  timed_out: "attention",
  abandoned: "attention",
  cancelled: "off",
};

const STEP: Record<string, Tone> = {
  pending: "off",
  running: "busy",
  done: "done",
  failed: "attention",
  uncertain: "attention",
};

/** slotTone: a slot lifecycle's tone (an unknown one from a newer server is "off"). */
export function slotTone(lifecycle: string): Tone {
  return SLOT[lifecycle] ?? "off";
}

/** jobTone: a job state's tone. */
export function jobTone(state: string): Tone {
  return JOB[state] ?? "off";
}

/** stepTone: a step state's tone. */
export function stepTone(state: string): Tone {
  return STEP[state] ?? "off";
}

/** ICON: a shape beside the word, so a state never rests on colour alone. */
export const TONE_ICON: Partial<Record<Tone, string>> = {
  attention: "!",
  done: "✓",
  soon: "◷",
  wait: "◷",
};
