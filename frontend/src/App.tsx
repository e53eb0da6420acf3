import { useEffect, useRef, useState } from "react";
import { Link, Route, Router, Switch, useLocation } from "wouter";
import { useHashLocation } from "wouter/use-hash-location";
import { ConnectionBanner } from "./components/ConnectionBanner";
import { LiveIndicator } from "./components/LiveIndicator";
import { LANGS, setLang, useT, type Lang } from "./i18n";
import { setActor, useActor } from "./live/actor";
import { useAnnouncement } from "./live/announce";
import { AuditPage } from "./pages/AuditPage";
import { Board } from "./pages/Board";
import { JobPage } from "./pages/JobPage";
import { RemainingPage } from "./pages/RemainingPage";
import { ResetLookup } from "./pages/ResetLookup";
import { SlotPage } from "./pages/SlotPage";
import { WaitView } from "./pages/WaitView";
import { InsightsPage } from "./insights/InsightsPage";
import { DeadlineBanner } from "./waitlist/DeadlineBanner";
import { WaitlistPage } from "./waitlist/WaitlistPage";

function Header() {
  const t = useT();
  const actor = useActor();
  const [actorError, setActorError] = useState(false);
  const saveActor = (v: string) => setActorError(!setActor(v));
  return (
    <header className="top">
      <a className="skip" href="#main">
        {t("app.skip")}
      </a>
      <Link href="/" className="brand">
        {t("app.title")}
      </Link>
      <nav aria-label={t("nav.main")}>
        <Link href="/">{t("nav.board")}</Link>
        <Link href="/audit">{t("nav.audit")}</Link>
        <Link href="/remaining">{t("nav.remaining")}</Link>
        <Link href="/waitlist">{t("nav.waitlist")}</Link>
        <Link href="/insights">{t("nav.insights")}</Link>
      </nav>
      <LiveIndicator />
      <label className="actor">
        <span className="sr-only">{t("actor.label")}</span>
        <input
          defaultValue={actor}
          placeholder={t("actor.placeholder")}
          aria-label={t("actor.label")}
          onBlur={(e) => saveActor(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter") saveActor(e.currentTarget.value);
          }}
          aria-invalid={actorError}
          aria-describedby={actorError ? "actor-error" : undefined}
          data-testid="actor"
        />
        {actorError && (
          <span id="actor-error" className="error small" role="alert">
            {t("actor.invalid")}
          </span>
        )}
      </label>
      <label>
        <span className="sr-only">{t("lang.label")}</span>
        <select aria-label={t("lang.label")} value={t.lang} onChange={(e) => setLang(e.target.value as Lang)} data-testid="lang">
          {LANGS.map((l) => (
            <option key={l} value={l}>
              {l === "ko" ? "한국어" : "English"}
            </option>
          ))}
        </select>
      </label>
    </header>
  );
}

function Announcer() {
  const { text, n } = useAnnouncement();
  return (
    <div className="sr-only" aria-live="polite" role="status" data-testid="announcer">
      <span key={n}>{text}</span>
    </div>
  );
}

/**
 * FocusOnNavigate moves focus to the main region after a route change, so a
 * keyboard or screen-reader user starts at the new page, not at a link that
 * no longer exists.
 */
function FocusOnNavigate() {
  const [location] = useLocation();
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    document.getElementById("main")?.focus({ preventScroll: false });
  }, [location]);
  return null;
}

/** App is the shell: header with the live indicator, the one banner, the routes. */
export function App() {
  return (
    <Router hook={useHashLocation}>
      <FocusOnNavigate />
      <Header />
      <ConnectionBanner />
      <DeadlineBanner />
      <Announcer />
      <main id="main" tabIndex={-1}>
        <Switch>
          <Route path="/">
            <Board />
          </Route>
          <Route path="/slots/:name/reset">{(p) => <ResetLookup key={p.name} slot={p.name} />}</Route>
          <Route path="/slots/:name">{(p) => <SlotPage key={p.name} name={p.name} />}</Route>
          <Route path="/jobs/:id/wait">{(p) => <WaitView key={p.id} id={p.id} />}</Route>
          <Route path="/jobs/:id">{(p) => <JobPage key={p.id} id={p.id} />}</Route>
          <Route path="/audit">
            <AuditPage />
          </Route>
          <Route path="/remaining">
            <RemainingPage />
          </Route>
          <Route path="/waitlist">
            <WaitlistPage />
          </Route>
          <Route path="/insights">
            <InsightsPage />
          </Route>
          <Route>
            <Board />
          </Route>
        </Switch>
      </main>
    </Router>
  );
}
