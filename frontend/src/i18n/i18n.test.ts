import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { JOB_KINDS, JOB_STATES, STEP_NAMES, STEP_STATES } from "../services/jobs";
import { RESOURCE_KINDS } from "../services/resources";
import { LIFECYCLES } from "../services/slots";
import { en } from "./en";
import { catalogues, detectLang, LANGS, makeT } from "./index";
import vocabulary from "./vocabulary.json";

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

  // Every sentence is written once per language: the server's English
  // table (events/english) and these dictionaries share their codes, and
  // vocabulary.json (generated from the Go table) lists the server's.
  it.each(LANGS)("%s words every code of the server's English table", (lang) => {
    expect(vocabulary.sentence_codes.length).toBeGreaterThan(100);
    for (const code of vocabulary.sentence_codes) expect(catalogues[lang][code as keyof typeof en], `${lang}:${code}`).toBeTruthy();
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

describe("Korean particles (issue 27 item 10)", () => {
  it("chooses each particle by the final consonant of the word filled in", async () => {
    const { particles, finalConsonant } = await import("./index");
    expect(particles("birch을(를) 찾을 수 없습니다")).toBe("birch를 찾을 수 없습니다");
    expect(particles("서울을(를)")).toBe("서울을");
    expect(particles("aurora이(가) 확보")).toBe("aurora가 확보");
    expect(particles("glacier이(가)")).toBe("glacier가");
    expect(particles("dune이(가)")).toBe("dune가");
    expect(particles("main(으)로 초기화")).toBe("main으로 초기화");
    expect(particles("slot-1(으)로")).toBe("slot-1로");
    expect(particles("오후 8:53(으)로")).toBe("오후 8:53으로");
    expect(particles("관리자(으)로")).toBe("관리자로");
    expect(particles("서울(으)로")).toBe("서울로");
    expect(particles("“데이터베이스 삭제”이(가)")).toBe("“데이터베이스 삭제”가");
    expect(finalConsonant("김민준").has).toBe(true);
    expect(finalConsonant("slot-2").has).toBe(false);
  });

  it("leaves no particle pair in any filled-in Korean message", () => {
    const t = makeT("ko");
    for (const key of Object.keys(en) as (keyof typeof en)[]) {
      const vars: Record<string, string> = {};
      for (const m of en[key].matchAll(/\{(\w+)\}/g)) vars[m[1]] = "birch";
      const out = t(key, vars);
      expect(out, key).not.toMatch(/을\(를\)|이\(가\)|은\(는\)|과\(와\)|\(으\)로/);
    }
  });
});
