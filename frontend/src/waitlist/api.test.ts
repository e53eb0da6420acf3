import { afterEach, describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../test/fakes";
import { forgetMe, whoAmI } from "./api";

afterEach(() => {
  forgetMe();
  vi.unstubAllGlobals();
});

describe("whoAmI", () => {
  it("reads the 200 not-signed-in answer (issue 27) as nobody, and asks again next time", async () => {
    const fetchMock = vi.fn(async () => jsonResponse({ signed_in: false, methods: ["local"] }));
    vi.stubGlobal("fetch", fetchMock);
    expect(await whoAmI()).toBeUndefined();
    fetchMock.mockImplementation(async () => jsonResponse({ signed_in: true, subject: { id: "user:w", name: "w", role: "member" }, csrf: "c" }));
    expect(await whoAmI()).toMatchObject({ subject: { name: "w" }, csrf: "c" });
    expect(fetchMock).toHaveBeenCalledTimes(2);
  });
});
