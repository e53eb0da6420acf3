import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { JOB_KINDS, JOB_STATES, LIFECYCLES, RESOURCE_KINDS, STEP_NAMES, STEP_STATES } from "../api/types";
import { en } from "./en";
import { catalogues, detectLang, LANGS, makeT } from "./index";

const placeholders = (s: string) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) return sources(p);
    return /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f) ? [p] : [];
  });
}

describe("i18n", () => {
  const keys = Object.keys(en).sort();

  it.each(LANGS)("%s has every key, none empty, with the same placeholders", (lang) => {
    const cat = catalogues[lang];
    expect(Object.keys(cat).sort()).toEqual(keys);
    for (const k of keys) {
      const v = cat[k as keyof typeof en];
      expect(v, `${lang}:${k}`).toBeTruthy();
      expect(placeholders(v), `${lang}:${k}`).toEqual(placeholders(en[k as keyof typeof en]));
    }
  });

  it("translates every server value the UI shows", () => {
    const need = [
      ...LIFECYCLES.map((v) => `lifecycle.${v}`),
      ...JOB_STATES.map((v) => `state.${v}`),
      ...STEP_STATES.map((v) => `stepstate.${v}`),
      ...JOB_KINDS.map((v) => `kind.${v}`),
      ...STEP_NAMES.map((v) => `step.${v}`),
      ...RESOURCE_KINDS.map((v) => `res.${v}`),
    ];
    for (const k of need) expect(keys, k).toContain(k);
  });

  it("has every key the source code asks for", () => {
    const root = join(__dirname, "..");
    const used = new Set<string>();
    for (const f of sources(root)) {
      for (const m of readFileSync(f, "utf8").matchAll(/\bt\(\s*"([a-z_]+\.[a-z_.]+)"/g)) used.add(m[1]);
    }
    expect(used.size).toBeGreaterThan(50);
    for (const k of used) expect(keys, k).toContain(k);
  });

  it("Korean text differs from English where a word is translated", () => {
    expect(catalogues.ko["wait.unknown"]).not.toBe(en["wait.unknown"]);
  });

  it("defaults to the browser language and honours a stored choice", () => {
    expect(detectLang(null, ["ko-KR", "en-US"])).toBe("ko");
    expect(detectLang(null, ["fr-FR"])).toBe("en");
    expect(detectLang("en", ["ko-KR"])).toBe("en");
  });

  it("starts in the browser's language without storing it as a choice, and marks <html lang>", async () => {
    localStorage.removeItem("slotkeeper.lang");
    document.documentElement.lang = "en";
    vi.stubGlobal("navigator", { languages: ["ko-KR", "en-US"], language: "ko-KR" });
    vi.resetModules();
    try {
      const fresh = await import("./index");
      expect(fresh.getLang()).toBe("ko");
      expect(document.documentElement.lang).toBe("ko");
      expect(localStorage.getItem("slotkeeper.lang")).toBeNull();
      fresh.setLang("en"); // the switch: now it is a choice
      expect(localStorage.getItem("slotkeeper.lang")).toBe("en");
      expect(document.documentElement.lang).toBe("en");
    } finally {
      vi.unstubAllGlobals();
      localStorage.removeItem("slotkeeper.lang");
    }
  });

  it("shows an unknown server value as itself", () => {
    expect(makeT("ko").dyn("step", "new_step_from_the_future")).toBe("new_step_from_the_future");
    expect(makeT("ko").dyn("step", "delete_db")).toBe("데이터베이스 삭제");
  });
});
