import { Link } from "wouter";
import type { ApiError } from "../api/client";
import { useT } from "../i18n";

/** CommandError shows why a command was refused, linking the blocking job. */
export function CommandError({ error }: { error: ApiError | undefined }) {
  const t = useT();
  if (!error) return null;
  const blocking = typeof error.details.blocking_job === "string" ? error.details.blocking_job : undefined;
  return (
    <p className="error" role="alert" data-testid="command-error">
      {t("common.error", { message: error.message })}
      {blocking && (
        <>
          {" "}
          <Link href={`/jobs/${encodeURIComponent(blocking)}`}>{t("common.view_timeline")}</Link>
        </>
      )}
    </p>
  );
}
