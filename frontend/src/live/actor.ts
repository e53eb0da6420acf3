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

const encoder = new TextEncoder();

/** The characters the server allows: letters (any script), decimal digits, space and .-_@+ */
const ALLOWED = /^[\p{L}\p{Nd} ._@+-]+$/u;

/**
 * validActor mirrors the server's check of X-Slotkeeper-Actor
 * (backend/httpapi checkActor): 1..64 bytes of UTF-8, every character a
 * letter of any script (Go's unicode.IsLetter, \p{L}), a decimal digit
 * (unicode.IsDigit, \p{Nd}), a space or one of .-_@+, and no leading or
 * trailing space. So "홍길동" is valid; a lone surrogate (not UTF-8), a
 * zero-width or bidi mark, or a name over 64 bytes (21 Hangul syllables fit)
 * is not.
 */
export function validActor(name: string): boolean {
  if (name === "" || name.trim() !== name || !ALLOWED.test(name)) return false;
  return encoder.encode(name).length <= 64;
}

/**
 * encodeActor is the header value for a name. Browsers only send Latin-1 in
 * a header (fetch throws on anything else), so the name goes as
 * percent-encoded UTF-8, which the server decodes when the value contains
 * "%" ("%" itself is not allowed in a name). An ASCII name of letters and
 * digits is left as it is; "Bob Kim" becomes "Bob%20Kim".
 */
export function encodeActor(name: string): string {
  return encodeURIComponent(name);
}
