// The name of the person using this tab, typed once and kept in
// localStorage; every command carries it as X-Slotkeeper-Actor.
import { useSyncExternalStore } from "react";
import { observable } from "./observable";

const KEY = "slotkeeper.actor";

function load(): string {
  try {
    return localStorage.getItem(KEY) ?? "";
  } catch {
    return "";
  }
}

const actor = observable<string>(load());

export function getActor(): string {
  return actor.get();
}

export function setActor(name: string): void {
  const v = name.trim().slice(0, 64);
  try {
    localStorage.setItem(KEY, v);
  } catch {
    // Private mode: the name lives for this tab only.
  }
  actor.set(v);
}

export function useActor(): string {
  return useSyncExternalStore(actor.subscribe, actor.get, actor.get);
}

/**
 * actorHeader is the header value for a name. HTTP header values must be
 * Latin-1, so a name with other characters (e.g. Hangul) is percent-encoded
 * (UTF-8); plain ASCII names are sent as typed.
 */
export function actorHeader(name: string): string {
  return /^[\x20-\x7e]*$/.test(name) ? name : encodeURIComponent(name);
}
