import { useLayoutEffect, useRef, useState, type KeyboardEvent, type MouseEvent } from "react";
import { api } from "../api/client";
import type { Plan, TargetCheck } from "../api/types";
import { formatTime, resourceLabel } from "../format";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";
import { CommandError } from "./CommandError";
import type { Command } from "../live/useCommand";

export interface ConfirmPlanProps {
  slot: string;
  kind: "reset" | "teardown" | "promote" | "adopt" | "delete_orphan";
  params?: { project?: string; name?: string };
  /**
   * loadPlan replaces the slot plan route for jobs planned elsewhere (an
   * adopt: GET /api/reconcile/adopt/plan); planKey names its inputs.
   */
  loadPlan?: { key: string; load: (signal: AbortSignal) => Promise<Plan> };
  command: Command;
  /** onConfirm gets the reason typed when one was asked for (else ""). */
  onConfirm: (reason: string) => void;
  onClose: () => void;
  /**
   * reasonFor: releasing a slot someone else occupies (an operator's
   * release); the server requires and records a reason, so Confirm waits
   * for one. The value is the occupant's name.
   */
  reasonFor?: string;
}

/**
 * ConfirmPlan is the confirmation in front of an irreversible job: it shows
 * the server's dry run (GET /api/slots/{name}/plan) — the exact steps and
 * the resources with their ids — and only then offers to go ahead.
 */
export function ConfirmPlan({ slot, kind, params, loadPlan, command, onConfirm, onClose, reasonFor }: ConfirmPlanProps) {
  const t = useT();
  const [reason, setReason] = useState("");
  const needsReason = reasonFor !== undefined;
  const reasonMissing = needsReason && reason.trim() === "";
  const plan = useLoad(
    `plan:${slot}:${kind}`,
    loadPlan?.key ?? `${slot}:${kind}:${params?.project ?? ""}:${params?.name ?? ""}`,
    (signal) => (loadPlan ? loadPlan.load(signal) : api.plan(slot, kind, params, signal)),
  );
  const dialogRef = useRef<HTMLDialogElement>(null);
  const cancelRef = useRef<HTMLButtonElement>(null);
  // The ref lets the mount-only effect below call the latest onClose.
  const closeRef = useRef(onClose);
  useLayoutEffect(() => {
    closeRef.current = onClose;
  });
  useLayoutEffect(() => {
    const dialog = dialogRef.current;
    if (!dialog) return;
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    // showModal puts the dialog in the top layer and makes the rest of the
    // page inert; jsdom (the unit tests) has no showModal, so there the
    // dialog is only opened and the Tab handling below keeps focus inside.
    if (typeof dialog.showModal === "function") dialog.showModal();
    else dialog.setAttribute("open", "");
    cancelRef.current?.focus();
    // Focus that lands outside anyway (a script, a click where inert is not
    // supported) is brought back.
    const keepInside = (e: FocusEvent): void => {
      if (e.target instanceof Node && !dialog.contains(e.target)) cancelRef.current?.focus();
    };
    document.addEventListener("focusin", keepInside);
    return () => {
      document.removeEventListener("focusin", keepInside);
      if (dialog.open && typeof dialog.close === "function") dialog.close();
      // Back to the button that opened the dialog, if it is still there and usable.
      if (opener && opener.isConnected && !opener.matches(":disabled")) opener.focus();
    };
  }, []);
  const onKeyDown = (e: KeyboardEvent<HTMLDialogElement>): void => {
    if (e.key === "Escape") {
      e.preventDefault();
      closeRef.current();
      return;
    }
    if (e.key !== "Tab") return;
    // Tab and Shift+Tab cycle inside: a modal dialog alone would let focus
    // leave for the browser's own controls after the last button.
    const items = focusables(e.currentTarget);
    if (items.length === 0) {
      e.preventDefault();
      return;
    }
    const first = items[0];
    const last = items[items.length - 1];
    const active = document.activeElement;
    if (e.shiftKey && (active === first || !e.currentTarget.contains(active) || active === e.currentTarget)) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && (active === last || !e.currentTarget.contains(active) || active === e.currentTarget)) {
      e.preventDefault();
      first.focus();
    }
  };
  // A click on the backdrop reaches the dialog element itself, outside its box.
  const onClick = (e: MouseEvent<HTMLDialogElement>): void => {
    if (e.target !== e.currentTarget) return;
    const r = e.currentTarget.getBoundingClientRect();
    const inside = e.clientX >= r.left && e.clientX <= r.right && e.clientY >= r.top && e.clientY <= r.bottom;
    if (!inside && r.width > 0) closeRef.current();
  };
  return (
    <dialog
      ref={dialogRef}
      className="dialog"
      aria-labelledby="plan-title"
      data-testid="confirm-plan"
      onKeyDown={onKeyDown}
      onCancel={(e) => {
        // Escape via the browser's close request: React owns whether it is open.
        e.preventDefault();
        closeRef.current();
      }}
      onClick={onClick}
    >
      <h2 id="plan-title">{t("plan.title", { kind: t.dyn("kind", kind), slot })}</h2>
      {plan.loading && !plan.data && <p>{t("plan.loading")}</p>}
      {plan.error && <CommandError error={plan.error} />}
      {plan.data && (
        <>
          <h3>{t("plan.steps")}</h3>
          <ol data-testid="plan-steps">
            {(plan.data.steps ?? []).map((s) => (
              <li key={s}>{t.dyn("step", s)}</li>
            ))}
          </ol>
          {plan.data.target && <TargetLine target={plan.data.target} />}
          {(plan.data.resources ?? []).length > 0 && (
            <>
              <h3>{t("plan.resources")}</h3>
              <ul data-testid="plan-resources">
                {(plan.data.resources ?? []).map((r) => (
                  <li key={`${r.kind}:${r.id}`}>{resourceLabel(r, t)}</li>
                ))}
              </ul>
            </>
          )}
          {/* Only a reset waits out a grace period; the others start at once. */}
          {plan.data.not_before && kind === "reset" && <p>{t("plan.not_before", { time: formatTime(plan.data.not_before, t.lang) })}</p>}
          <p className="warn-text">{t("plan.irreversible")}</p>
        </>
      )}
      {needsReason && (
        <div className="reason">
          <p id="reason-why">{t("release.reason_needed", { occupant: reasonFor })}</p>
          <label>
            <span>{t("release.reason")}</span>
            <textarea
              value={reason}
              required
              maxLength={500}
              rows={2}
              aria-describedby="reason-why"
              onChange={(e) => setReason(e.target.value)}
              data-testid="release-reason"
            />
          </label>
        </div>
      )}
      <CommandError error={command.error} />
      <div className="dialog-actions">
        <button type="button" ref={cancelRef} onClick={onClose}>
          {t("common.cancel")}
        </button>
        <button
          type="button"
          className="danger"
          data-testid="confirm"
          disabled={!plan.data || command.pending || reasonMissing || plan.data.target?.state === "exists"}
          onClick={() => onConfirm(needsReason ? reason.trim() : "")}
        >
          {t("common.confirm")}
        </button>
      </div>
    </dialog>
  );
}

/** TargetLine says what the plan's lookup of a promote's target found (issue 14). */
function TargetLine({ target }: { target: TargetCheck }) {
  const t = useT();
  const repo = `${target.repo.project}/${target.repo.slug}`;
  const text =
    target.state === "exists"
      ? t("plan.target_exists", { repo })
      : target.state === "free"
        ? t("plan.target_free", { repo })
        : t("plan.target_unknown", { repo, reason: target.error ?? "" });
  const cls = target.state === "exists" ? "recovery" : target.state === "free" ? "notice" : "unknown";
  return (
    <p className={cls} data-testid="plan-target" data-state={target.state} role={target.state === "exists" ? "alert" : undefined}>
      {text}
    </p>
  );
}

const FOCUSABLE =
  'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/** focusables lists the elements Tab can reach inside el, in document order. */
function focusables(el: HTMLElement): HTMLElement[] {
  return Array.from(el.querySelectorAll<HTMLElement>(FOCUSABLE)).filter((x) => !x.hidden && !x.closest("[inert]"));
}
