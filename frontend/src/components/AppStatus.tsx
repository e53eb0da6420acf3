import type { SlotView } from "../services/slots";
import { useT, type Key, type T } from "../i18n";
import { known } from "../format";
import { unready } from "../pages/boardModel";
import { StateBadge } from "../ui/Badge";

/** READY_KEY: the short word and the sentence for why a vacant slot is not ready. */
export const READY_KEY: Record<string, [Key, Key]> = {
  never_reset: ["ready.never_reset", "ready.never_reset_long"],
  no_template: ["ready.no_template", "ready.no_template_long"],
  no_template_reset: ["ready.no_template", "ready.no_template_reset_long"],
  not_healthy: ["ready.not_healthy", "ready.not_healthy_long"],
  reset_incomplete: ["ready.reset_incomplete", "ready.reset_incomplete_long"],
};


/** appURL is the first http(s) URL of Coolify's comma-separated fqdn, or undefined (never a javascript: link). */
export function appURL(fqdn?: string): string | undefined {
  const first = fqdn?.split(",")[0]?.trim();
  return first && /^https?:\/\//i.test(first) ? first : undefined;
}

/**
 * appStatusText words Coolify's status of the application ("running:healthy",
 * "exited:unhealthy", "running:unknown": state and health) in the reader's
 * language, "running · no health check" for the unknown health of an app
 * without one; a status it does not know stays Coolify's word (the raw
 * status is the element's title either way).
 */
export function appStatusText(status: string | undefined, noHealthCheck: boolean | undefined, t: T): string {
  const [state = "", health = ""] = (status ?? "").split(":");
  const stateKey = `coolify.state.${state}`;
  if (!known(stateKey)) return [status, noHealthCheck ? t("slot.no_health_check") : ""].filter(Boolean).join(" · ");
  const parts = [t(stateKey as Key)];
  if (health && known(`coolify.health.${health}`)) parts.push(t(`coolify.health.${health}` as Key));
  else if (noHealthCheck || health === "unknown") parts.push(t("slot.no_health_check"));
  else if (health) parts.push(health);
  return parts.join(" · ");
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
  const notReady = unready(slot);
  return (
    <div className="app-status" data-testid="app-status">
      {d && (
        <div>
          {url && (
            <a href={url} target="_blank" rel="noopener noreferrer" data-testid="app-url">
              {url}
            </a>
          )}{" "}
          <span className="muted" data-testid="app-health" title={d.status}>
            {appStatusText(d.status, d.no_health_check, t)}
          </span>
          {d.commit && (
            <span className="muted small" data-testid="app-commit">
              {" "}
              · {t("slot.commit")} <code>{d.commit.slice(0, 12)}</code>
            </span>
          )}
        </div>
      )}
      {slot.lifecycle === "vacant" && slot.ready && (
        <StateBadge tone="done" data-testid="slot-ready">
          {t("slot.ready")}
        </StateBadge>
      )}
      {notReady && (
        // Worded from the code in the reader's language (issue 35 items 2, 5).
        <div className="small" data-testid="slot-missing" data-code={notReady.code}>
          {READY_KEY[notReady.code] ? t(READY_KEY[notReady.code][1], notReady.args) : `${t("slot.not_ready")}: ${slot.missing?.join("; ") ?? ""}`}
        </div>
      )}
    </div>
  );
}
