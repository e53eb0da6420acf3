import { useState, type FormEvent } from "react";
import { ApiError } from "../services/http";
import { changePassword, useAuth } from "../auth/session";
import { CommandError } from "../components/CommandError";
import { useT } from "../i18n";
import { announce } from "../live/announce";

/** MIN_PASSWORD is the server's shortest password (backend/auth MinPasswordLen). */
export const MIN_PASSWORD = 10;

/** AccountPage: who you are, and a password change for a local account. */
export function AccountPage() {
  const t = useT();
  const auth = useAuth();
  const subject = auth.status === "signed_in" ? auth.subject : undefined;
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [repeat, setRepeat] = useState("");
  const [problem, setProblem] = useState<"" | "mismatch" | "too_short">("");
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [done, setDone] = useState(false);
  const [pending, setPending] = useState(false);
  if (!subject) return null;
  const account = subject.id.startsWith("user:");
  // The demo's demo-admin and single sign-on accounts have no password anyone knows.
  const hasPassword = account && auth.status === "signed_in" && auth.passwordChange === true;

  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    setDone(false);
    setError(undefined);
    if (next.length < MIN_PASSWORD) return setProblem("too_short");
    if (next !== repeat) return setProblem("mismatch");
    setProblem("");
    setPending(true);
    try {
      await changePassword(current, next);
      setCurrent("");
      setNext("");
      setRepeat("");
      setDone(true);
      announce(t("account.changed"));
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, "network", String(err)));
    } finally {
      setPending(false);
    }
  };

  const wrongCurrent = error?.status === 400 && error.details.field === "current";
  return (
    <section aria-labelledby="account-title" data-testid="account-page" className="admin">
      <h1 id="account-title">{t("account.title")}</h1>
      <p>
        <strong>{subject.name}</strong> <span className={`badge role role-${subject.role}`}>{t.dyn("role", subject.role)}</span>
      </p>
      {(hasPassword || !account) && <h2>{t("account.password_title")}</h2>}
      {!account ? (
        <p className="muted">{t("account.token")}</p>
      ) : !hasPassword ? (
        <p className="muted" data-testid="account-no-password">
          {t("account.no_password")}
        </p>
      ) : (
        <form className="admin-form" onSubmit={(e) => void submit(e)}>
          <input type="text" name="username" autoComplete="username" value={subject.name} readOnly hidden />
          <label>
            <span>{t("account.current")}</span>
            <input
              type="password"
              required
              autoComplete="current-password"
              value={current}
              onChange={(e) => setCurrent(e.target.value)}
              aria-invalid={wrongCurrent}
              data-testid="pw-current"
            />
          </label>
          <label>
            <span>{t("account.new")}</span>
            <input type="password" required autoComplete="new-password" value={next} onChange={(e) => setNext(e.target.value)} data-testid="pw-new" />
          </label>
          <label>
            <span>{t("account.repeat")}</span>
            <input type="password" required autoComplete="new-password" value={repeat} onChange={(e) => setRepeat(e.target.value)} data-testid="pw-repeat" />
          </label>
          <button type="submit" className="primary" disabled={pending} data-testid="pw-submit">
            {t("account.submit")}
          </button>
          <p className="muted small">{t("account.hint", { min: MIN_PASSWORD })}</p>
        </form>
      )}
      {problem && (
        <p className="error" role="alert" data-testid="pw-problem">
          {problem === "mismatch" ? t("account.mismatch") : t("account.too_short", { min: MIN_PASSWORD })}
        </p>
      )}
      {wrongCurrent ? (
        <p className="error" role="alert" data-testid="pw-wrong">
          {t("account.wrong_current")}
        </p>
      ) : (
        <CommandError error={error} />
      )}
      {done && (
        <p className="notice" role="status" data-testid="pw-changed">
          {t("account.changed")}
        </p>
      )}
    </section>
  );
}
