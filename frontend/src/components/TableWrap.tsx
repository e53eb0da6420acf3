import type { ReactNode } from "react";

/**
 * TableWrap holds a table that may be wider than a phone: it scrolls
 * sideways on its own, and it is a named, focusable region so a keyboard
 * user can scroll it too (axe: scrollable-region-focusable).
 */
export function TableWrap({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="table-wrap" tabIndex={0} role="region" aria-label={label}>
      {children}
    </div>
  );
}
