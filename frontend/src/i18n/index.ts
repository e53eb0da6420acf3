// Translation: the language comes from the browser by default, can be
// switched, and is persisted. t() looks a key up in the current catalogue
// and fills {placeholders}; dynamic values (lifecycles, states, steps) go
// through the typed helpers so an unknown value shows as itself.
import { useSyncExternalStore } from "react";
import { observable } from "../live/observable";
import { en, type Key } from "./en";
import { ko } from "./ko";

export type Lang = "en" | "ko";
export const LANGS: readonly Lang[] = ["en", "ko"];
export const catalogues: Record<Lang, Record<Key, string>> = { en, ko };
export type { Key };

const KEY = "slotkeeper.lang";

export function detectLang(stored: string | null, browser: readonly string[]): Lang {
  if (stored === "en" || stored === "ko") return stored;
  for (const l of browser) {
    const base = l.toLowerCase().split("-")[0];
    if (base === "ko" || base === "en") return base;
  }
  return "en";
}

function initialLang(): Lang {
  let stored: string | null;
  try {
    stored = localStorage.getItem(KEY);
  } catch {
    stored = null;
  }
  const browser = typeof navigator === "undefined" ? [] : (navigator.languages ?? [navigator.language]);
  return detectLang(stored, browser);
}

const lang = observable<Lang>(initialLang());
// The page's language from the start, not only after a switch: screen
// readers pick their voice from it.
if (typeof document !== "undefined") document.documentElement.lang = lang.get();

export function getLang(): Lang {
  return lang.get();
}

export function setLang(l: Lang): void {
  try {
    localStorage.setItem(KEY, l);
  } catch {
    // Not persisted in private mode; still switched for this tab.
  }
  if (typeof document !== "undefined") document.documentElement.lang = l;
  lang.set(l);
}

export type Vars = Record<string, string | number>;

export function translate(l: Lang, key: Key, vars?: Vars): string {
  const s = catalogues[l][key] ?? en[key];
  if (!vars) return l === "ko" ? particles(s) : s;
  const filled = s.replace(/\{(\w+)\}/g, (m, name: string) => (name in vars ? String(vars[name]) : m));
  return l === "ko" ? particles(filled) : filled;
}

// Korean particles depend on whether the word before them ends in a
// consonant (받침): "birch를", "서울을", "slot-2가". The catalogue writes
// both forms ("{slot}을(를)"); particles() keeps the one that fits the
// filled-in word (issue 27 item 10), like a person writing it.
const PAIRS: Record<string, [string, string]> = {
  "을(를)": ["을", "를"],
  "이(가)": ["이", "가"],
  "은(는)": ["은", "는"],
  "과(와)": ["과", "와"],
  "이(라)": ["이라", "라"],
};

/**
 * finalConsonant says whether a word, read aloud in Korean, ends in a
 * consonant: a Hangul syllable by its 받침; a digit as it is read
 * (일 삼 육 칠 팔 십 영 have one); a Latin letter by how the loanword is
 * written (…l, …m, …n, …ng end in ㄹ ㅁ ㄴ ㅇ; "birch" is 버치, no 받침).
 * "rieul" is true for ㄹ, which takes 로 rather than 으로.
 */
export function finalConsonant(word: string): { has: boolean; rieul: boolean } {
  const w = word.replace(/[\s)"'”’»\]]+$/u, "");
  const c = w.at(-1) ?? "";
  const code = c.charCodeAt(0);
  if (code >= 0xac00 && code <= 0xd7a3) {
    const jong = (code - 0xac00) % 28;
    return { has: jong !== 0, rieul: jong === 8 };
  }
  if (/[0-9]/.test(c)) return { has: "0136780".includes(c), rieul: "178".includes(c) };
  const lower = w.toLowerCase();
  if (lower.endsWith("ng") || /[mn]$/.test(lower)) return { has: true, rieul: false };
  if (lower.endsWith("l")) return { has: true, rieul: true };
  return { has: false, rieul: false };
}

export function particles(s: string): string {
  return s.replace(/([^\s(]+?)(을\(를\)|이\(가\)|은\(는\)|과\(와\)|이\(라\)|\(으\)로)/gu, (_m, word: string, p: string) => {
    const f = finalConsonant(word);
    if (p === "(으)로") return word + (f.has && !f.rieul ? "으로" : "로");
    const pair = PAIRS[p];
    return word + (f.has ? pair[0] : pair[1]);
  });
}

/** DynPrefix: the server values translated by prefix (vocabulary.json lists them). */
export type DynPrefix = "step" | "state" | "stepstate" | "lifecycle" | "kind" | "res" | "role" | "event" | "perm" | "error";

export type T = ((key: Key, vars?: Vars) => string) & {
  lang: Lang;
  /** dyn translates a server value under a prefix ("step", "state", …), or shows it raw. */
  dyn: (prefix: DynPrefix, value: string) => string;
};

const cache = new Map<Lang, T>();

export function makeT(l: Lang): T {
  const hit = cache.get(l);
  if (hit) return hit;
  const t = ((key: Key, vars?: Vars) => translate(l, key, vars)) as T;
  t.lang = l;
  t.dyn = (prefix, value) => {
    const k = `${prefix}.${value}`;
    return k in en ? translate(l, k as Key) : value;
  };
  cache.set(l, t);
  return t;
}

export function useT(): T {
  const l = useSyncExternalStore(lang.subscribe, lang.get, lang.get);
  return makeT(l);
}
