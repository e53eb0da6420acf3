import * as RCheckbox from "@radix-ui/react-checkbox";

/** Checkbox is Radix's (a button with role checkbox, keyboard and indeterminate state), styled by tokens.css. */
export function Checkbox({
  checked,
  onChange,
  label,
  testId,
}: {
  checked: boolean | "indeterminate";
  onChange: (checked: boolean) => void;
  label: string;
  testId?: string;
}) {
  return (
    <RCheckbox.Root className="sk-check" checked={checked} onCheckedChange={(c) => onChange(c === true)} aria-label={label} data-testid={testId}>
      <RCheckbox.Indicator className="sk-check-mark" aria-hidden="true">
        {checked === "indeterminate" ? "–" : "✓"}
      </RCheckbox.Indicator>
    </RCheckbox.Root>
  );
}
