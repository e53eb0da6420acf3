import { useLayoutEffect, useRef, useState, type KeyboardEvent, type MouseEvent } from "react";
import type { Resource } from "../services/resources";
import { slotsService, type Plan, type SlotView, type TargetCheck } from "../services/slots";
import { formatDuration, formatTime, resourceLabel } from "../format";
import { useNow } from "../live/ticker";
import { FailureRaw } from "./FailureRaw";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";
import { CommandError } from "./CommandError";
import type { Command } from "../live/useCommand";
import type { JobKind } from "../services/jobs";

export interface ConfirmPlanProps {
  slot: string;
  kind: JobKind;
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
  /**
   * occupied: the slot as the board holds it, when someone else occupies
   * it — the dialog names the occupant and the time they have left.
   */
  othersSlot?: SlotView;
}

/**
 * ConfirmPlan is the confirmation in front of an irreversible job: it shows
 * the server's dry run (GET /api/slots/{name}/plan) — the exact steps and
 * the resources with their ids — and only then offers to go ahead.
 */
export function ConfirmPlan({ slot, kind, params, loadPlan, command, onConfirm, onClose, reasonFor, othersSlot }: ConfirmPlanProps) {
  const t = useT();
  const [reason, setReason] = useState("");
  // A teardown deletes everything for good: the slot's name must be typed.
  const [typed, setTyped] = useState("");
  const nameMissing = kind === "teardown" && typed.trim() !== slot;
  const needsReason = reasonFor !== undefined;
  const reasonMissing = needsReason && reason.trim() === "";
  const plan = useLoad(
    `plan:${slot}:${kind}`,
    loadPlan?.key ?? `${slot}:${kind}:${params?.project ?? ""}:${params?.name ?? ""}`,
    (signal) => (loadPlan ? loadPlan.load(signal) : slotsService.plan(slot, kind, params, signal)),
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
          <PlanChanges kind={kind} resources={plan.data.resources ?? []} target={plan.data.target} />
          {/* Only a reset waits out a grace period; the others start at once. */}
          {plan.data.not_before && kind === "reset" && <p>{t("plan.not_before", { time: formatTime(plan.data.not_before, t.lang) })}</p>}
          <p className="warn-text">{t("plan.irreversible")}</p>
        </>
      )}
      {othersSlot?.occupant && <OthersSlot slot={othersSlot} />}
      {kind === "teardown" && plan.data && (
        <label className="type-name">
          <span>{t("confirm.type_name", { slot })}</span>
          <input
            value={typed}
            onChange={(e) => setTyped(e.target.value)}
            autoComplete="off"
            spellCheck={false}
            data-testid="type-name"
            aria-invalid={typed !== "" && nameMissing}
          />
        </label>
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
          disabled={!plan.data || command.pending || reasonMissing || nameMissing || plan.data.target?.state === "exists"}
          onClick={() => onConfirm(needsReason ? reason.trim() : "")}
        >
          {t("common.confirm")}
        </button>
      </div>
    </dialog>
  );
}

/**
 * PlanChanges lists exactly what the job deletes, overwrites or creates,
 * one line per resource with its id, in the reader's language (the plan's
 * own resource names are the server's English).
 */
function PlanChanges({ kind, resources, target }: { kind: string; resources: readonly Resource[]; target?: TargetCheck }) {
  const t = useT();
  const rows: { verb: "delete" | "overwrite" | "create"; text: string; key: string }[] = resources.map((r) => {
    const key = `${r.kind}:${r.id}`;
    if (kind === "reset" && r.kind === "env_var") return { verb: "delete", key, text: t("confirm.envvars_of", { id: r.id }) };
    if (kind === "reset" && r.kind === "volume") return { verb: "delete", key, text: t("confirm.volumes_of", { id: r.id }) };
    if (kind === "reset" && r.kind === "repository") {
      const a = r.name_code === "branch_reset" ? r.name_args : undefined;
      return {
        verb: "overwrite",
        key,
        text: a?.branch && a.template ? t("confirm.branch_reset", { branch: a.branch, repo: r.id, template: a.template }) : resourceLabel(r, t),
      };
    }
    return { verb: "delete", key, text: resourceLabel(r, t) };
  });
  // A target that already exists is not created: the dialog says only that
  // it exists (issue 27 item 7: "Created …" sat under that error).
  if (kind === "promote" && target && target.state !== "exists") {
    rows.push({ verb: "create", key: "target", text: t("confirm.promote_creates", { repo: `${target.repo.project}/${target.repo.slug}` }) });
  }
  if (rows.length === 0) return null;
  const verbKey = { delete: "confirm.will_delete", overwrite: "confirm.will_overwrite", create: "confirm.will_create" } as const;
  return (
    <>
      <h3>{t("confirm.what")}</h3>
      <ul data-testid="plan-resources" className="plan-changes">
        {rows.map((r) => (
          <li key={r.key} data-verb={r.verb}>
            <span className={`badge verb verb-${r.verb}`}>{t(verbKey[r.verb])}</span> {r.text}
          </li>
        ))}
      </ul>
    </>
  );
}

/** OthersSlot names the person whose slot this is and the time they have left. */
function OthersSlot({ slot }: { slot: SlotView }) {
  const t = useT();
  const now = useNow();
  const deadline = slot.deadline ? Date.parse(slot.deadline) : NaN;
  const time = slot.deadline ? formatTime(slot.deadline, t.lang) : t("common.unknown");
  const text =
    !Number.isNaN(deadline) && deadline < now
      ? t("confirm.someone_else_overdue", { slot: slot.name, occupant: slot.occupant ?? "", time })
      : t("confirm.someone_else", {
          slot: slot.name,
          occupant: slot.occupant ?? "",
          left: Number.isNaN(deadline) ? t("common.unknown") : formatDuration(deadline - now, t),
          time,
        });
  return (
    <p className="recovery" data-testid="others-slot">
      {text}
    </p>
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
        : t("plan.target_unknown", { repo });
  const cls = target.state === "exists" ? "recovery" : target.state === "free" ? "notice" : "unknown";
  return (
    <div className={cls} data-testid="plan-target" data-state={target.state} role={target.state === "exists" ? "alert" : undefined}>
      {text}
      {/* Why it could not be checked, in the server's or the git host's words: folded, never the sentence. */}
      {target.state !== "exists" && target.state !== "free" && <FailureRaw failure={{ raw: target.error }} />}
    </div>
  );
}

const FOCUSABLE =
  'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/** focusables lists the elements Tab can reach inside el, in document order. */
function focusables(el: HTMLElement): HTMLElement[] {
  return Array.from(el.querySelectorAll<HTMLElement>(FOCUSABLE)).filter((x) => !x.hidden && !x.closest("[inert]"));
}
