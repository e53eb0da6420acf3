import { Link } from "wouter";
import type { ApiError } from "../services/http";
import { useSubject } from "../auth/session";
import { apiErrorText } from "../format";
import { useT, type T } from "../i18n";

/** errorText is what a refused command says: a 403 names the role and the missing permission. */
export function errorText(error: ApiError, t: T, role: string | undefined): string {
  if (error.status === 403) {
    const r = role ? t.dyn("role", role) : t("common.unknown");
    const p = error.permission;
    return p ? t("auth.forbidden", { role: r, permission: t.dyn("perm", p) }) : t("auth.forbidden_plain", { role: r, message: apiErrorText(error, t) });
  }
  return apiErrorText(error, t);
}

/** CommandError shows why a command was refused, linking the blocking job. */
export function CommandError({ error }: { error: ApiError | undefined }) {
  const t = useT();
  const subject = useSubject();
  if (!error) return null;
  const blocking = typeof error.details.blocking_job === "string" ? error.details.blocking_job : undefined;
  return (
    <p className="error" role="alert" data-testid="command-error" data-status={error.status}>
      {errorText(error, t, subject?.role)}
      {blocking && (
        <>
          {" "}
          <Link href={`/jobs/${encodeURIComponent(blocking)}`}>{t("common.view_timeline")}</Link>
        </>
      )}
    </p>
  );
}
