import { failureRawLabel, type Failure } from "../format";
import { useT } from "../i18n";

/**
 * FailureRaw is a failure's original message (the provider's answer or the
 * engine's own English), folded under a label that says whose words they
 * are: the page's own sentence (format.failureText) comes first, in the
 * reader's language; this is the secondary detail for whoever asks the
 * provider about it.
 */
export function FailureRaw({ failure, className = "failure-raw" }: { failure: Failure; className?: string }) {
  const t = useT();
  if (!failure.raw) return null;
  return (
    <details className={className} data-testid="failure-raw">
      <summary>{failureRawLabel(failure, t)}</summary>
      <pre className="step-error" lang="en">
        {failure.raw}
      </pre>
    </details>
  );
}
