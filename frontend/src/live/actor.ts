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

/** setActor stores a valid name (or "" to clear it); it returns false for an invalid one. */
export function setActor(name: string): boolean {
  const v = name.trim();
  if (v !== "" && !validActor(v)) return false;
  try {
    localStorage.setItem(KEY, v);
  } catch {
    // Private mode: the name lives for this tab only.
  }
  actor.set(v);
  return true;
}

export function useActor(): string {
  return useSyncExternalStore(actor.subscribe, actor.get, actor.get);
}

/**
 * validActor mirrors the server's check of X-Slotkeeper-Actor (1..64
 * characters: letters, digits, space and .-_@+). Browsers can only send
 * Latin-1 in a header, so the dashboard accepts ASCII letters only; a name
 * in Hangul would be refused by fetch itself.
 */
export function validActor(name: string): boolean {
  return /^[A-Za-z0-9._@+-](?:[A-Za-z0-9 ._@+-]{0,62}[A-Za-z0-9._@+-])?$/.test(name);
}
