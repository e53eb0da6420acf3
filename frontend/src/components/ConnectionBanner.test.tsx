import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { setLang } from "../i18n";
import { forgetSource, reportFailure, reportRecovery } from "../live/health";
import { ConnectionBanner } from "./ConnectionBanner";

beforeEach(() => setLang("en"));

const banner = () => screen.queryByTestId("connection-banner");

describe("connection banner", () => {
  it("shows at the first failure, not after some count of them", () => {
    render(<ConnectionBanner />);
    expect(banner()).toBeNull();
    act(() => reportFailure("stream", "stale"));
    expect(banner()?.textContent).toMatch(/silent for two heartbeats/);
  });

  it("clears only when every failing source has recovered", () => {
    render(<ConnectionBanner />);
    act(() => {
      reportFailure("stream", "disconnected");
      reportFailure("job:j1", "request_failed");
    });
    // Another source succeeding does not clear anything.
    act(() => reportRecovery("slot:s9"));
    expect(banner()).not.toBeNull();
    act(() => reportRecovery("stream"));
    expect(banner()).not.toBeNull();
    expect(banner()?.textContent).toMatch(/could not be loaded/);
    expect(banner()?.textContent).not.toMatch(/disconnected/);
    act(() => reportRecovery("job:j1"));
    expect(banner()).toBeNull();
  });

  it("drops a closed page's failure, since its data is no longer shown", () => {
    render(<ConnectionBanner />);
    act(() => reportFailure("job:j1", "request_failed"));
    act(() => forgetSource("job:j1"));
    expect(banner()).toBeNull();
  });

  it("sits in an assertive live region", () => {
    render(<ConnectionBanner />);
    expect(screen.getByRole("status").getAttribute("aria-live")).toBe("assertive");
  });
});
