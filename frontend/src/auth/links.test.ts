import { describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../test/fakes";
import { getProviderLinks, setProviderLinks } from "./links";
import { checkSession } from "./session";

describe("provider links", () => {
  it("come from the signed-in answer of /api/auth/me", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () =>
        jsonResponse({ subject: { id: "u-1", name: "ada", role: "viewer" }, csrf: "c", links: { coolify: "https://c.example", bitbucket: "https://b.example" } }),
      ),
    );
    await checkSession(true);
    expect(getProviderLinks()).toEqual({ coolify: "https://c.example", bitbucket: "https://b.example" });
  });

  it("are none when the server names none", async () => {
    setProviderLinks({ coolify: "https://old.example" });
    vi.stubGlobal("fetch", vi.fn(async () => jsonResponse({ subject: { id: "u-1", name: "ada", role: "viewer" }, csrf: "c" })));
    await checkSession(true);
    expect(getProviderLinks()).toEqual({});
  });
});
