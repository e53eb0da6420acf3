import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { jsonResponse, slot } from "../test/fakes";
import { EarlierDeadline, localInput } from "./EarlierDeadline";

let posts: { url: string; body: { deadline: string; confirm_earlier: boolean } }[];

beforeEach(() => {
  setLang("en");
  posts = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      posts.push({ url, body: JSON.parse(String(init?.body)) });
      return jsonResponse(slot({ name: "dune", position: 50 }));
    }),
  );
});

describe("set an earlier deadline", () => {
  const deadline = Date.now() + 5 * 3_600_000;
  const view = slot({ name: "dune", occupant: "bob", deadline: new Date(deadline).toISOString() });

  it("refuses a later or past time without asking the server, and confirms an earlier one naming both times", async () => {
    render(<EarlierDeadline slot={view} />);
    const input = screen.getByTestId("deadline-input");
    fireEvent.change(input, { target: { value: localInput(deadline + 3_600_000) } });
    fireEvent.click(screen.getByTestId("deadline-review"));
    expect(screen.getByTestId("deadline-problem").textContent).toMatch(/must be earlier than the current one.*use Extend/);
    fireEvent.change(input, { target: { value: localInput(Date.now() - 3_600_000) } });
    fireEvent.click(screen.getByTestId("deadline-review"));
    expect(screen.getByTestId("deadline-problem").textContent).toMatch(/in the future/);
    expect(posts).toEqual([]);

    const target = deadline - 2 * 3_600_000;
    fireEvent.change(input, { target: { value: localInput(target) } });
    fireEvent.click(screen.getByTestId("deadline-review"));
    expect(screen.queryByTestId("deadline-problem")).toBeNull();
    expect(screen.getByTestId("deadline-confirm").textContent).toMatch(/Move the deadline of dune from .+ to .+\?/);
    expect(posts).toEqual([]); // nothing sent before the confirmation
    fireEvent.click(screen.getByTestId("deadline-confirm-button"));
    await act(async () => {});
    expect(posts).toHaveLength(1);
    expect(posts[0].url).toBe("/api/slots/dune/deadline");
    expect(posts[0].body.confirm_earlier).toBe(true);
    expect(Math.abs(Date.parse(posts[0].body.deadline) - target)).toBeLessThan(60_000);
  });
});
