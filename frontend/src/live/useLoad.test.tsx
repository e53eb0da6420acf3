import { act, render, screen } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { ApiError } from "../services/http";
import { getHealth } from "./health";
import { useLoad, type Load } from "./useLoad";

function Probe({ fn }: { fn: () => Promise<string> }) {
  const load: Load<string> = useLoad("probe", "k", fn);
  return (
    <>
      <p data-testid="probe">{load.loading ? "loading" : (load.data ?? load.error?.code)}</p>
      <button type="button" onClick={load.reload}>
        reload
      </button>
    </>
  );
}

const flush = () => act(async () => {});

describe("useLoad and the banner", () => {
  it("a failed load keeps its own failure until that same load succeeds", async () => {
    const fn = vi.fn<() => Promise<string>>().mockRejectedValueOnce(new ApiError(0, "network", "down")).mockResolvedValueOnce("ok");
    render(<Probe fn={fn} />);
    await flush();
    expect(getHealth().failing.get("probe")).toBe("request_failed");
    act(() => screen.getByRole("button", { name: "reload" }).click());
    await flush();
    expect(screen.getByTestId("probe").textContent).toBe("ok");
    expect(getHealth().failing.size).toBe(0);
  });

  it("a 404 is an answer, not a connection failure", async () => {
    render(<Probe fn={() => Promise.reject(new ApiError(404, "not_found", "no"))} />);
    await flush();
    expect(screen.getByTestId("probe").textContent).toBe("not_found");
    expect(getHealth().failing.size).toBe(0);
  });

  it("a 5xx counts as failing, and closing the page forgets it", async () => {
    const { unmount } = render(<Probe fn={() => Promise.reject(new ApiError(503, "unavailable", "busy"))} />);
    await flush();
    expect(getHealth().failing.has("probe")).toBe(true);
    unmount();
    expect(getHealth().failing.has("probe")).toBe(false);
  });
});
