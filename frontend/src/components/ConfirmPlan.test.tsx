import { act, render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { useState } from "react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { useCommand } from "../live/useCommand";
import { jsonResponse, slot } from "../test/fakes";
import { ConfirmPlan } from "./ConfirmPlan";

beforeEach(() => {
  setLang("en");
  vi.stubGlobal(
    "fetch",
    vi.fn(async () =>
      jsonResponse({ not_before: "2026-01-01T00:00:00Z", kind: "teardown", slot: "s1", steps: ["delete_app", "retire"], resources: [{ kind: "application", id: "a-1" }] }),
    ),
  );
});

/** Page has controls before and after the opener, so focus has somewhere to escape to. */
function Page({ onConfirm }: { onConfirm: () => void }) {
  const [open, setOpen] = useState(false);
  const cmd = useCommand();
  return (
    <>
      <a href="#before">before</a>
      <button type="button" data-testid="opener" onClick={() => setOpen(true)}>
        teardown
      </button>
      <input aria-label="after" />
      {/* A reset: the focus trap is the subject here, not the typed name a teardown asks for (tested below). */}
      {open && <ConfirmPlan slot="s1" kind="reset" command={cmd} onConfirm={onConfirm} onClose={() => setOpen(false)} />}
    </>
  );
}

const flush = () => act(async () => {});

async function openDialog() {
  const user = userEvent.setup();
  const onConfirm = vi.fn();
  render(<Page onConfirm={onConfirm} />);
  await user.click(screen.getByTestId("opener"));
  await flush(); // the plan arrives; Confirm is enabled
  const dialog = screen.getByTestId("confirm-plan");
  return { user, dialog, onConfirm };
}

describe("confirmation dialog", () => {
  it("is a native dialog that traps Tab and Shift+Tab, closes on Escape and gives focus back to its opener", async () => {
    const { user, dialog, onConfirm } = await openDialog();
    expect(dialog.tagName).toBe("DIALOG");
    expect(dialog).toHaveProperty("open", true);
    expect(screen.getByRole("dialog", { name: /reset.*s1/i })).toBe(dialog);
    const cancel = screen.getByRole("button", { name: "Cancel" });
    const confirm = screen.getByTestId("confirm");
    expect((confirm as HTMLButtonElement).disabled).toBe(false);
    expect(document.activeElement).toBe(cancel);

    // Forward: Cancel → Confirm → (wrap) Cancel, never the page behind.
    const seen: Element[] = [];
    for (let i = 0; i < 4; i++) {
      await user.tab();
      seen.push(document.activeElement as Element);
    }
    expect(seen).toEqual([confirm, cancel, confirm, cancel]);
    // Backward: Cancel → (wrap) Confirm → Cancel.
    await user.tab({ shift: true });
    expect(document.activeElement).toBe(confirm);
    await user.tab({ shift: true });
    expect(document.activeElement).toBe(cancel);

    // Focus moved outside by other means is brought back.
    act(() => screen.getByLabelText("after").focus());
    expect(dialog.contains(document.activeElement)).toBe(true);

    await user.keyboard("{Escape}");
    expect(screen.queryByTestId("confirm-plan")).toBeNull();
    expect(document.activeElement).toBe(screen.getByTestId("opener"));
    expect(onConfirm).not.toHaveBeenCalled();
  });

  it("keeps focus on Cancel while the plan is loading (the only control)", async () => {
    let answer: (r: Response) => void = () => {};
    vi.stubGlobal("fetch", vi.fn(() => new Promise<Response>((r) => (answer = r))));
    const user = userEvent.setup();
    render(<Page onConfirm={() => {}} />);
    await user.click(screen.getByTestId("opener"));
    const cancel = screen.getByRole("button", { name: "Cancel" });
    expect((screen.getByTestId("confirm") as HTMLButtonElement).disabled).toBe(true);
    await user.tab();
    expect(document.activeElement).toBe(cancel);
    await user.tab({ shift: true });
    expect(document.activeElement).toBe(cancel);
    answer(jsonResponse({ not_before: "2026-01-01T00:00:00Z", kind: "teardown", slot: "s1", steps: [], resources: [] }));
    await flush();
    await user.tab();
    expect(document.activeElement).toBe(screen.getByTestId("confirm"));
  });

  it("uses showModal where the browser has it, and closes the modal on Escape", async () => {
    const proto = HTMLDialogElement.prototype as unknown as Record<string, unknown>;
    const showModal = vi.fn(function (this: HTMLDialogElement) {
      this.setAttribute("open", "");
    });
    const close = vi.fn(function (this: HTMLDialogElement) {
      this.removeAttribute("open");
    });
    const saved = { showModal: proto.showModal, close: proto.close };
    proto.showModal = showModal;
    proto.close = close;
    try {
      const { user } = await openDialog();
      expect(showModal).toHaveBeenCalledTimes(1);
      await user.keyboard("{Escape}");
      expect(close).toHaveBeenCalledTimes(1);
      expect(screen.queryByTestId("confirm-plan")).toBeNull();
      expect(document.activeElement).toBe(screen.getByTestId("opener"));
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete proto[k];
        else proto[k] = v;
      }
    }
  });
});

describe("promote confirmation names what the target lookup found (issue 14)", () => {
  function Promote() {
    const cmd = useCommand();
    return <ConfirmPlan slot="s1" kind="promote" params={{ project: "NEW", name: "copy" }} command={cmd} onConfirm={() => {}} onClose={() => {}} />;
  }
  const answer = (target: unknown) =>
    vi.stubGlobal(
      "fetch",
      vi.fn(async () =>
        jsonResponse({ kind: "promote", slot: "s1", steps: ["lookup_repo", "create_repo"], resources: [], not_before: "2026-01-01T00:00:00Z", target }),
      ),
    );
  const confirm = () => screen.getByTestId("confirm") as HTMLButtonElement;

  it("an existing target is named and Confirm is off", async () => {
    answer({ repo: { project: "NEW", slug: "copy" }, state: "exists" });
    render(<Promote />);
    await flush();
    const el = screen.getByTestId("plan-target");
    expect(el.getAttribute("data-state")).toBe("exists");
    expect(el.textContent).toMatch(/NEW\/copy already exists/);
    expect(confirm().disabled).toBe(true);
    // Not also "will be created" under the error (issue 27 item 7).
    expect(document.body.textContent).not.toMatch(/Created|will create|creates/i);
  });

  it("a free target says it will be created", async () => {
    answer({ repo: { project: "NEW", slug: "copy" }, state: "free" });
    render(<Promote />);
    await flush();
    expect(screen.getByTestId("plan-target").textContent).toMatch(/NEW\/copy does not exist yet/);
    expect(confirm().disabled).toBe(false);
  });

  it("a target that could not be checked says so with the reason, in ko too", async () => {
    answer({ repo: { project: "NEW", slug: "copy" }, state: "unknown", error: "HTTP 503" });
    setLang("ko");
    render(<Promote />);
    await flush();
    const text = screen.getByTestId("plan-target").textContent ?? "";
    expect(text).toMatch(/NEW\/copy.*확인하지 못했습니다/);
    // The reason in the server's words is there, folded under its label.
    expect(screen.getByTestId("failure-raw").textContent).toMatch(/원문 메시지 \(영어\)HTTP 503/);
    expect(confirm().disabled).toBe(false);
  });
});

describe("confirmations name what they change (issue 14)", () => {
  const confirm = () => screen.getByTestId("confirm") as HTMLButtonElement;
  const Dialog = ({ kind, othersSlot }: { kind: "reset" | "teardown"; othersSlot?: ReturnType<typeof slot> }) => {
    const cmd = useCommand();
    return <ConfirmPlan slot="dune" kind={kind} command={cmd} onConfirm={() => {}} onClose={() => {}} othersSlot={othersSlot} />;
  };

  it("a teardown needs the slot's name typed, and lists every resource it deletes", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () =>
        jsonResponse({ not_before: "2026-01-01T00:00:00Z",
          kind: "teardown",
          slot: "dune",
          steps: ["delete_db", "delete_app", "delete_repo", "delete_project", "retire"],
          resources: [
            { kind: "database", id: "d-1" },
            { kind: "application", id: "a-1" },
            { kind: "repository", id: "SLOT/dune" },
            { kind: "project", id: "p-1" },
          ],
        }),
      ),
    );
    const user = userEvent.setup();
    render(<Dialog kind="teardown" />);
    await flush();
    const rows = screen.getByTestId("plan-resources").querySelectorAll("li");
    expect([...rows].map((r) => r.getAttribute("data-verb"))).toEqual(["delete", "delete", "delete", "delete"]);
    expect(screen.getByTestId("plan-resources").textContent).toMatch(/Deleted.*d-1.*a-1.*SLOT\/dune.*p-1/);
    expect(confirm().disabled).toBe(true);
    await user.type(screen.getByTestId("type-name"), "dun");
    expect(confirm().disabled).toBe(true);
    await user.type(screen.getByTestId("type-name"), "e");
    expect(confirm().disabled).toBe(false);
  });

  it("a reset says what it deletes and what it overwrites, in Korean too, and names someone else's occupancy", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () =>
        jsonResponse({ not_before: "2026-01-01T00:00:00Z",
          kind: "reset",
          slot: "dune",
          steps: ["delete_db", "delete_env_vars", "delete_volumes", "force_push_template", "vacate"],
          resources: [
            { kind: "database", id: "d-1" },
            { kind: "env_var", id: "a-1", name: "env vars of the application" },
            { kind: "volume", id: "a-1", name: "persistent volumes of the application" },
            {
              kind: "repository",
              id: "SLOT/dune",
              name: "branch main reset to TPL/template@main",
              name_code: "branch_reset",
              name_args: { branch: "main", template: "TPL/template@main" },
            },
          ],
        }),
      ),
    );
    setLang("ko");
    const deadline = new Date(Date.now() + 3 * 3_600_000 + 120_000).toISOString();
    render(<Dialog kind="reset" othersSlot={slot({ name: "dune", occupant: "bob", deadline })} />);
    await flush();
    const list = screen.getByTestId("plan-resources");
    expect([...list.querySelectorAll("li")].map((r) => r.getAttribute("data-verb"))).toEqual(["delete", "delete", "delete", "overwrite"]);
    expect(list.textContent).toMatch(/a-1의 모든 환경 변수/);
    expect(list.textContent).toMatch(/SLOT\/dune의 main 브랜치를 TPL\/template@main으로 초기화/);
    expect(list.textContent).not.toMatch(/env vars of the application|reset to/);
    expect(screen.getByTestId("others-slot").textContent).toMatch(/bob님이 사용 중이며 3시간 \d+분 남았습니다/);
    expect(screen.queryByTestId("type-name")).toBeNull();
  });
});
