import { apiErrorText } from "../format";
import { useT } from "../i18n";
import type { Load } from "../live/useLoad";

/**
 * LoadFallback is what a page shows while the view it needs is not in the
 * store yet: loading, the page's own "not found" sentence on a 404, or the
 * error with a retry button. It never guesses a state.
 */
export function LoadFallback<T>({ load, notFound }: { load: Load<T>; notFound: string }) {
  const t = useT();
  if (load.loading) return <p>{t("common.loading")}</p>;
  if (load.error?.notFound)
    return (
      <div role="alert" data-testid="not-found">
        <p>{notFound}</p>
        <p>
          <a href="#/">{t("route.to_board")}</a> · <a href="#/jobs">{t("nav.jobs")}</a>
        </p>
      </div>
    );
  return (
    <p role="alert">
      {load.error ? t("common.error", { message: apiErrorText(load.error, t) }) : null}{" "}
      <button type="button" onClick={load.reload}>
        {t("common.retry")}
      </button>
    </p>
  );
}
