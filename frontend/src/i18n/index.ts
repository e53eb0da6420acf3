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
  if (!vars) return s;
  return s.replace(/\{(\w+)\}/g, (m, name: string) => (name in vars ? String(vars[name]) : m));
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
