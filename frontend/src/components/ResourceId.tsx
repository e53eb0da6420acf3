import { useState } from "react";
import type { Resource } from "../services/resources";
import { useProviderLinks, type ProviderLinks } from "../auth/links";
import { useT } from "../i18n";

/**
 * resourceHref is a resource's page at its provider, or undefined when the
 * provider's address is not configured or the resource has no page of its
 * own: a Bitbucket repository ("KEY/slug") opens its repository page; a
 * Coolify project its project page, and an application or database the
 * page of the slot's project that holds it (Coolify's own resource pages
 * also need the environment, which Slotkeeper does not record).
 */
export function resourceHref(r: Resource, links: ProviderLinks, project?: string): string | undefined {
  const q = encodeURIComponent;
  switch (r.kind) {
    case "repository": {
      const [key, slug] = r.id.split("/");
      return links.bitbucket && key && slug ? `${links.bitbucket}/projects/${q(key)}/repos/${q(slug)}/browse` : undefined;
    }
    case "project":
      return links.coolify ? `${links.coolify}/project/${q(r.id)}` : undefined;
    case "application":
    case "database":
      return links.coolify && project ? `${links.coolify}/project/${q(project)}` : undefined;
  }
  return undefined;
}

/** providerOf names the provider that holds a resource kind. */
export function providerOf(kind: string): string {
  return kind === "repository" ? "Bitbucket" : "Coolify";
}

/**
 * ResourceId shows a resource id as code, linked to its page at the
 * provider when there is one, with a button that copies the id.
 */
export function ResourceId({ r, project }: { r: Resource; project?: string }) {
  const t = useT();
  const links = useProviderLinks();
  const href = resourceHref(r, links, project);
  return (
    <span className="resource-id" data-testid="resource-id" data-kind={r.kind}>
      {href ? (
        <a href={href} target="_blank" rel="noopener noreferrer" title={t("resid.open_in", { id: r.id, provider: providerOf(r.kind) })} data-testid="resource-link">
          <code>{r.id}</code>
          <span aria-hidden="true"> ↗</span>
          <span className="sr-only"> {t("resid.opens_at", { provider: providerOf(r.kind) })}</span>
        </a>
      ) : (
        <code>{r.id}</code>
      )}
      <CopyButton text={r.id} />
    </span>
  );
}

/** CopyButton copies an id to the clipboard and says whether it worked (every id on the dashboard has one). */
export function CopyButton({ text, testId = "copy-id" }: { text: string; testId?: string }) {
  const t = useT();
  const [copied, setCopied] = useState<"" | "ok" | "failed">("");
  const copy = () => {
    const done = (ok: boolean) => setCopied(ok ? "ok" : "failed");
    if (!navigator.clipboard) return done(false);
    navigator.clipboard.writeText(text).then(
      () => done(true),
      () => done(false),
    );
  };
  return (
    <button type="button" className="copy" onClick={copy} onBlur={() => setCopied("")} aria-label={copied === "" ? t("resid.copy", { id: text }) : undefined} data-testid={testId}>
      {copied === "ok" ? t("resid.copied") : copied === "failed" ? t("resid.copy_failed") : t("resid.copy_short")}
    </button>
  );
}
