import type { SlotView } from "../services/slots";
import { useT } from "../i18n";

/** appURL is the first http(s) URL of Coolify's comma-separated fqdn, or undefined (never a javascript: link). */
export function appURL(fqdn?: string): string | undefined {
  const first = fqdn?.split(",")[0]?.trim();
  return first && /^https?:\/\//i.test(first) ? first : undefined;
}

/**
 * AppStatus shows what a person needs from a preview slot (issue 23): the
 * app's URL, its health and the commit it runs, and for a vacant slot
 * "ready" or what is missing.
 */
export function AppStatus({ slot }: { slot: SlotView }) {
  const t = useT();
  const d = slot.deployed;
  const url = appURL(d?.fqdn);
  return (
    <div className="app-status" data-testid="app-status">
      {d && (
        <div>
          {url && (
            <a href={url} target="_blank" rel="noopener noreferrer" data-testid="app-url">
              {url}
            </a>
          )}{" "}
          <span className="muted" data-testid="app-health">
            {d.status}
            {d.no_health_check && <> · {t("slot.no_health_check")}</>}
          </span>
          {d.commit && (
            <span className="muted small" data-testid="app-commit">
              {" "}
              · {t("slot.commit")} <code>{d.commit.slice(0, 12)}</code>
            </span>
          )}
        </div>
      )}
      {slot.lifecycle === "vacant" &&
        (slot.ready ? (
          <span className="badge ok" data-testid="slot-ready">
            ✓ {t("slot.ready")}
          </span>
        ) : (
          (slot.missing?.length ?? 0) > 0 && (
            <div className="muted small" data-testid="slot-missing">
              {t("slot.not_ready")}: {slot.missing?.join("; ")}
            </div>
          )
        ))}
    </div>
  );
}
