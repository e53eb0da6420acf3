import { useEffect, useRef } from "react";
import { api } from "../api/client";
import { formatTime, resourceLabel } from "../format";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";
import { CommandError } from "./CommandError";
import type { Command } from "../live/useCommand";

export interface ConfirmPlanProps {
  slot: string;
  kind: "reset" | "teardown" | "promote";
  params?: { project?: string; name?: string };
  command: Command;
  onConfirm: () => void;
  onClose: () => void;
}

/**
 * ConfirmPlan is the confirmation in front of an irreversible job: it shows
 * the server's dry run (GET /api/slots/{name}/plan) — the exact steps and
 * the resources with their ids — and only then offers to go ahead.
 */
export function ConfirmPlan({ slot, kind, params, command, onConfirm, onClose }: ConfirmPlanProps) {
  const t = useT();
  const plan = useLoad(`plan:${slot}:${kind}`, `${slot}:${kind}:${params?.project ?? ""}:${params?.name ?? ""}`, (signal) =>
    api.plan(slot, kind, params, signal),
  );
  const cancelRef = useRef<HTMLButtonElement>(null);
  useEffect(() => cancelRef.current?.focus(), []);
  return (
    <>
    <div className="backdrop" aria-hidden="true" onClick={onClose} />
    <div
      className="dialog"
      role="dialog"
      aria-modal="true"
      aria-labelledby="plan-title"
      data-testid="confirm-plan"
      onKeyDown={(e) => {
        if (e.key === "Escape") onClose();
      }}
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
          <h3>{t("plan.resources")}</h3>
          <ul data-testid="plan-resources">
            {(plan.data.resources ?? []).map((r) => (
              <li key={`${r.kind}:${r.id}`}>{resourceLabel(r, t)}</li>
            ))}
          </ul>
          {plan.data.not_before && <p>{t("plan.not_before", { time: formatTime(plan.data.not_before, t.lang) })}</p>}
          <p className="warn-text">{t("plan.irreversible")}</p>
        </>
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
          disabled={!plan.data || command.pending}
          onClick={onConfirm}
        >
          {t("common.confirm")}
        </button>
      </div>
    </div>
    </>
  );
}
