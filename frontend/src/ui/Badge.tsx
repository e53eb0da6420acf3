import type { ReactNode } from "react";
import { TONE_ICON, type Tone } from "./tone";

/**
 * StateBadge is the one state pill: a tinted background, a dot or an icon,
 * and a word, in its tone's colour (ui/tokens.css). Extra attributes (test
 * ids) pass through.
 */
export function StateBadge({ tone, children, className = "", ...rest }: { tone: Tone; children: ReactNode; className?: string } & Record<`data-${string}`, string | undefined>) {
  const icon = TONE_ICON[tone];
  return (
    <span className={`sk-badge ${className}`.trim()} data-tone={tone} {...rest}>
      {icon ? (
        <span className="sk-icon" aria-hidden="true">
          {icon}
        </span>
      ) : (
        <span className="sk-dot" aria-hidden="true" />
      )}
      {children}
    </span>
  );
}
