import { useState, type FormEvent } from "react";
import { ApiError } from "../services/http";
import { demoSignIn, signIn } from "../auth/session";
import { apiErrorText } from "../format";
import { useT, type T } from "../i18n";

/** DEMO_ADMIN is the loopback demo's account (backend/cmd/slotkeeper DemoAdmin). */
export const DEMO_ADMIN = "demo-admin";

/** OIDC_LOGIN is where the single sign-on button goes (the server redirects to the provider). */
export const OIDC_LOGIN = "/api/auth/oidc/login";

/**
 * signInError words a failed sign-in: one message for unknown user and wrong password, the wait on 429
 * (limited) and 503 (too many password checks at once in the server, issue 33).
 */
export function signInError(e: ApiError, t: T): string {
  if (e.status === 401) return t("auth.bad_credentials");
  if (e.status === 429 || e.status === 503) {
    const s = Number(e.details.retry_after);
    return Number.isFinite(s) && s > 0 ? t("auth.rate_limited", { seconds: Math.ceil(s) }) : t("auth.rate_limited_later");
  }
  return apiErrorText(e, t);
}

/**
 * SignIn is shown instead of the routes while the tab is signed out; the
 * hash route stays, so a successful sign-in lands on the page asked for.
 */
export function SignIn({ methods, expired }: { methods: string[]; expired: boolean }) {
  const t = useT();
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [pending, setPending] = useState(false);
  // The refusal itself, worded at render time so a language switch rewords it.
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const local = methods.includes("local") || !methods.includes("oidc");
  const oidc = methods.includes("oidc");
  const demo = methods.includes("demo");
  const [demoError, setDemoError] = useState<ApiError | undefined>(undefined);

  const continueAsDemo = async () => {
    if (pending) return;
    setPending(true);
    setDemoError(undefined);
    try {
      await demoSignIn(methods);
    } catch (err) {
      setDemoError(err instanceof ApiError ? err : new ApiError(0, "network", String(err)));
      setPending(false);
    }
  };

  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    if (pending) return;
    setPending(true);
    setError(undefined);
    try {
      await signIn(name.trim(), password);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, "network", String(err)));
      setPassword("");
      setPending(false);
    }
  };

  return (
    <section className="signin" aria-labelledby="signin-title" data-testid="signin-page">
      <h1 id="signin-title">{t("auth.title")}</h1>
      <p className="muted">{t("auth.intro")}</p>
      {expired && (
        <p className="notice" role="status" data-testid="signin-expired">
          {t("auth.expired")}
        </p>
      )}
      {demo && (
        <div className="signin-demo">
          <p>{t("auth.demo_intro", { name: DEMO_ADMIN })}</p>
          <button type="button" className="primary" disabled={pending} onClick={() => void continueAsDemo()} data-testid="signin-demo">
            {t("auth.demo", { name: DEMO_ADMIN })}
          </button>
          {demoError && (
            <p className="error" role="alert" data-testid="signin-demo-error">
              {signInError(demoError, t)}
            </p>
          )}
        </div>
      )}
      {demo && local && <p className="or">{t("auth.or")}</p>}
      {local && (
        <form onSubmit={(e) => void submit(e)} className="signin-form" noValidate={false}>
          <label>
            <span>{t("auth.name")}</span>
            <input
              name="username"
              autoComplete="username"
              autoCapitalize="none"
              spellCheck={false}
              required
              value={name}
              onChange={(e) => setName(e.target.value)}
              data-testid="signin-name"
            />
          </label>
          <label>
            <span>{t("auth.password")}</span>
            <input
              name="password"
              type="password"
              autoComplete="current-password"
              required
              value={password}
              onChange={(e) => setPassword(e.target.value)}
              aria-invalid={error !== undefined}
              aria-describedby={error ? "signin-error" : undefined}
              data-testid="signin-password"
            />
          </label>
          {error && (
            <p id="signin-error" className="error" role="alert" data-testid="signin-error">
              {signInError(error, t)}
            </p>
          )}
          <button type="submit" className={demo ? undefined : "primary"} disabled={pending} data-testid="signin-submit">
            {pending ? t("auth.submitting") : t("auth.submit")}
          </button>
        </form>
      )}
      {local && oidc && <p className="or">{t("auth.or")}</p>}
      {oidc && (
        <a className="button primary" href={OIDC_LOGIN} data-testid="signin-oidc">
          {t("auth.oidc")}
        </a>
      )}
    </section>
  );
}
