import { useEffect } from "react";
import { useT } from "../i18n";
import { clearOutcome, useOutcome } from "../live/outcome";

/** OutcomeNotice shows what a command just did, with a ✓ (the word says it too); it goes when the page does. */
export function OutcomeNotice({ where }: { where: string }) {
  const t = useT();
  const o = useOutcome(where);
  useEffect(() => () => clearOutcome(where), [where]);
  if (!o) return null;
  return (
    <p className="notice outcome" role="status" data-testid="outcome" key={o.n}>
      <span aria-hidden="true">✓ </span>
      <strong>{t("outcome.done")}</strong> {o.text}
      {o.link && (
        <>
          {" "}
          <a href={o.link.href} target="_blank" rel="noopener noreferrer" data-testid="outcome-link">
            {o.link.text}
          </a>
        </>
      )}
    </p>
  );
}
