import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { step } from "../test/fakes";
import { Steps } from "./Steps";

const NOW = new Date("2026-01-01T00:10:00Z");

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(NOW);
  setLang("en");
});

describe("steps", () => {
  it("a waiting step shows its elapsed time live, from the one global ticker (issue 14)", async () => {
    const setInterval = vi.spyOn(globalThis, "setInterval");
    render(
      <Steps
        steps={[
          step("delete_db", "done", { started_at: "2026-01-01T00:08:00Z", ended_at: "2026-01-01T00:08:01Z" }),
          step("delete_app", "running", { started_at: "2026-01-01T00:08:55Z", attempt: 2 }),
          step("delete_repo", "running", { started_at: "2026-01-01T00:09:00Z" }),
        ]}
      />,
    );
    const elapsed = () => screen.getAllByTestId("step-elapsed").map((e) => e.textContent);
    expect(elapsed()).toEqual(["running for 1m 5s", "running for 1m"]);
    await act(async () => {
      await vi.advanceTimersByTimeAsync(2_000);
    });
    expect(elapsed()).toEqual(["running for 1m 7s", "running for 1m 2s"]);
    expect(setInterval.mock.calls.length).toBeLessThanOrEqual(1);
    expect(document.querySelector('[data-step="delete_db"] [data-testid=step-elapsed]')).toBeNull();
  });

  it("a step waiting on Coolify shows its phase, for how long, and a link to the deployment (issue 32), in en and ko", () => {
    const url = "https://coolify.example/project/p/environment/e/application/a/deployment/d1";
    const steps = [
      step("deploy", "running", {
        started_at: "2026-01-01T00:01:00Z",
        wait: { phase: "queued", since: "2026-01-01T00:07:00Z", ahead: 3, building: 2, url },
      }),
    ];
    const { unmount } = render(<Steps steps={steps} />);
    const wait = screen.getByTestId("step-wait");
    expect(wait.dataset.phase).toBe("queued");
    expect(wait.textContent).toContain("queued in Coolify behind 3 other deployment(s), 2 building");
    expect(wait.textContent).toContain("for 3m");
    expect(screen.getByTestId("step-wait-link").getAttribute("href")).toBe(url);
    unmount();
    setLang("ko");
    render(<Steps steps={[step("deploy", "running", { wait: { phase: "building", since: "2026-01-01T00:09:00Z", url } })]} />);
    expect(screen.getByTestId("step-wait").textContent).toContain("Coolify에서 빌드 중");
    expect(screen.getByTestId("step-wait-link").textContent).toBe("Coolify에서 열기");
  });

  it("a done deploy without a health check says so; a done step shows no wait", () => {
    render(
      <Steps
        steps={[
          step("deploy", "done", {
            no_health_check: true,
            wait: { phase: "building", since: "2026-01-01T00:09:00Z" },
          }),
        ]}
      />,
    );
    expect(screen.getByTestId("step-no-health-check").textContent).toContain("no health check");
    expect(screen.queryByTestId("step-wait")).toBeNull();
  });
});
