// The outcome moment (issue 27 item 5): a finished command says so where the
// person lands. A page that navigates away on success (the wait view, to the
// slot page) leaves its sentence here; the page it lands on shows it once,
// under its title, until the next navigation or the next outcome.
import { useSyncExternalStore } from "react";
import { observable } from "./observable";

export interface Outcome {
  /** Where it is shown: "slot:<name>" or "job:<id>". */
  where: string;
  text: string;
  /** A link to what the command made (a promote's new repository). */
  link?: { href: string; text: string };
  n: number;
}

const current = observable<Outcome | undefined>(undefined);
let n = 0;

export function setOutcome(o: Omit<Outcome, "n">): void {
  current.set({ ...o, n: ++n });
}

export function clearOutcome(where: string): void {
  if (current.get()?.where === where) current.set(undefined);
}

/** useOutcome is the outcome meant for this place, if any. */
export function useOutcome(where: string): Outcome | undefined {
  const o = useSyncExternalStore(current.subscribe, current.get, current.get);
  return o?.where === where ? o : undefined;
}

/** resetOutcome is for tests. */
export function resetOutcome(): void {
  current.set(undefined);
  n = 0;
}
