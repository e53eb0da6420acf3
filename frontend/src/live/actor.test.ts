import { afterEach, describe, expect, it, vi } from "vitest";
import { api } from "../api/client";
import { encodeActor, getActor, setActor, validActor } from "./actor";

// The same rules as backend/httpapi checkActor: letters of any script
// (unicode.IsLetter), decimal digits (unicode.IsDigit), space and .-_@+,
// 1..64 bytes of UTF-8, no surrounding space. Each case below was also run
// through a copy of the Go function when this table was written (Go 1.26).
const valid = [
  "alice",
  "Bob Kim",
  "ops-bot_2",
  "a.b@c+d",
  "홍길동",
  "김민준",
  "김 민준",
  "Kim 민준-2",
  "가".repeat(21), // 63 bytes
  "x".repeat(64),
  "Zoë", // precomposed ë is a letter
  "１２３", // full-width digits are Nd
  "\u1100\u1161", // conjoining jamo (ᄀ + ᅡ) are letters (Lo)
];
const invalid = [
  "",
  " lead",
  "trail ",
  "가".repeat(22), // 66 bytes
  "x".repeat(65),
  "a/b",
  "semi;colon",
  "100%",
  "tab\there",
  "new\nline",
  "zero\u200bwidth",
  "bidi\u202eflip",
  "wide\u3000space", // ideographic space is not the ASCII space
  "Zoe\u0308", // a combining mark is not a letter
  "smile😀",
  "lone\ud800", // not UTF-8
  "Ⅻ", // a letter number (Nl), not a decimal digit
];

describe("actor name", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    setActor("");
  });

  it("accepts exactly what the server accepts, Hangul included", () => {
    for (const ok of valid) expect(validActor(ok), JSON.stringify(ok)).toBe(true);
    for (const bad of invalid) expect(validActor(bad), JSON.stringify(bad)).toBe(false);
  });

  it("persists a valid name (Hangul too) and refuses an invalid one without changing the stored name", () => {
    expect(setActor("  alice ")).toBe(true);
    expect(getActor()).toBe("alice");
    expect(localStorage.getItem("slotkeeper.actor")).toBe("alice");
    expect(setActor("홍길동")).toBe(true);
    expect(getActor()).toBe("홍길동");
    expect(localStorage.getItem("slotkeeper.actor")).toBe("홍길동");
    expect(setActor("홍길동\u200b")).toBe(false);
    expect(getActor()).toBe("홍길동");
  });

  it("percent-encodes the name as UTF-8, leaving a plain ASCII name readable", () => {
    expect(encodeActor("김민준")).toBe("%EA%B9%80%EB%AF%BC%EC%A4%80");
    expect(encodeActor("alice")).toBe("alice");
    expect(encodeActor("Bob Kim")).toBe("Bob%20Kim");
    expect(encodeActor("a.b@c+d")).toBe("a.b%40c%2Bd");
    // Every valid name encodes to printable ASCII and decodes back to itself
    // (the server uses url.PathUnescape, which leaves "+" as "+").
    for (const name of valid.filter((n) => n !== "")) {
      const h = encodeActor(name);
      expect(h, name).toMatch(/^[\x21-\x7e]+$/);
      expect(decodeURIComponent(h)).toBe(name);
    }
  });

  it("sends a Hangul name through fetch as a Latin-1-safe header", async () => {
    // Headers enforces the browser's rule: a value above U+00FF throws, as
    // fetch does in Chromium, so an unencoded Hangul name would fail here.
    const seen: string[] = [];
    vi.stubGlobal(
      "fetch",
      vi.fn(async (_url: string, init: RequestInit) => {
        const h = new Headers(init.headers);
        seen.push(h.get("X-Slotkeeper-Actor") ?? "(none)");
        return new Response(JSON.stringify({ job_id: "j1" }), { status: 202, headers: { "Content-Type": "application/json" } });
      }),
    );
    expect(() => new Headers({ "X-Slotkeeper-Actor": "김민준" })).toThrow();
    setActor("김민준");
    await api.release("s1");
    setActor("alice");
    await api.release("s1");
    setActor("");
    await api.release("s1");
    expect(seen).toEqual(["%EA%B9%80%EB%AF%BC%EC%A4%80", "alice", "(none)"]);
  });
});
