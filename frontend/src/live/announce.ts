// Status changes are announced to screen readers through one polite
// aria-live region (rendered by App). It survives navigation, so "release
// finished" is still read after the wait view moves to the slot page.
import { useSyncExternalStore } from "react";
import { observable } from "./observable";

const message = observable<{ text: string; n: number }>({ text: "", n: 0 });

export function announce(text: string): void {
  message.update((m) => ({ text, n: m.n + 1 }));
}

export function useAnnouncement(): { text: string; n: number } {
  return useSyncExternalStore(message.subscribe, message.get, message.get);
}

/** resetAnnouncement is for tests. */
export function resetAnnouncement(): void {
  message.set({ text: "", n: 0 });
}
