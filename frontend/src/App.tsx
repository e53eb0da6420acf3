import { Suspense, lazy, useEffect, useRef, useState, type ComponentType, type ReactNode } from "react";
import { Link, Route, Router, Switch, useLocation } from "wouter";
import { hashHrefs, useHashPathLocation } from "./live/hashQuery";
import { ConnectionBanner } from "./components/ConnectionBanner";
import { LiveIndicator } from "./components/LiveIndicator";
import { apiErrorText } from "./format";
import { LANGS, setLang, useT, type Key, type Lang } from "./i18n";
import { setTab } from "./live/tabState";
import { atLeast, type Subject } from "./auth/roles";
import { checkSession, signOut, useAuth, type AuthState } from "./auth/session";
import { useAnnouncement } from "./live/announce";
import { Board } from "./pages/Board";
import { JobPage } from "./pages/JobPage";
import { ResetLookup } from "./pages/ResetLookup";
import { SignIn } from "./pages/SignIn";
import { SlotPage } from "./pages/SlotPage";
import { WaitView } from "./pages/WaitView";
import { simService } from "./services/sim";
import { useLoad } from "./live/useLoad";
import { DeadlineBanner } from "./waitlist/DeadlineBanner";
import { FreshnessBadge } from "./replay/Freshness";
import { decodeAt, SlotAsOfPage } from "./replay/SlotAsOf";

function LangSwitch() {
  const t = useT();
  return (
    <label className="lang">
      <span className="sr-only">{t("lang.label")}</span>
      <select aria-label={t("lang.label")} value={t.lang} onChange={(e) => setLang(e.target.value as Lang)} data-testid="lang">
        {LANGS.map((l) => (
          <option key={l} value={l}>
            {l === "ko" ? "한국어" : "English"}
          </option>
        ))}
      </select>
    </label>
  );
}

/** WhoAmI names the signed-in subject and role, with the sign-out button. */
function WhoAmI({ subject }: { subject: Subject }) {
  const t = useT();
  const [pending, setPending] = useState(false);
  return (
    <div className="whoami" data-testid="whoami" data-role={subject.role}>
      <span className="who">
        <span className="sr-only">{t("auth.signed_in_as", { name: subject.name })}</span>
        <Link href="/account" className="who-name" data-testid="whoami-name" aria-label={t("account.open", { name: subject.name })}>
          {subject.name}
        </Link>{" "}
        <span className={`badge role role-${subject.role}`} data-testid="whoami-role" title={t("auth.role", { role: t.dyn("role", subject.role) })}>
          {t.dyn("role", subject.role)}
        </span>
      </span>
      <button
        type="button"
        disabled={pending}
        onClick={() => {
          setPending(true);
          void signOut().finally(() => setPending(false));
        }}
        data-testid="signout"
      >
        {t("auth.sign_out")}
      </button>
    </div>
  );
}

function Header({ subject }: { subject: Subject | undefined }) {
  const t = useT();
  const [location] = useLocation();
  // On a phone the navigation and who is signed in fold behind one button
  // (issue 27 item 1: three wrapped header rows took 17 % of the screen and
  // hid the top of every page); a route change folds it again.
  const [open, setOpen] = useState(false);
  const [openedAt, setOpenedAt] = useState(location);
  if (open && openedAt !== location) setOpen(false);
  return (
    <header className="top" data-menu={open ? "open" : "closed"}>
      <a className="skip" href="#main">
        {t("app.skip")}
      </a>
      {subject ? (
        <Link href="/" className="brand">
          {t("app.title")}
        </Link>
      ) : (
        <span className="brand">{t("app.title")}</span>
      )}
      {subject && <LiveIndicator />}
      {subject && <FreshnessBadge />}
      {subject && (
        <button
          type="button"
          className="menu-toggle"
          aria-expanded={open}
          aria-controls="top-menu"
          onClick={() => {
            setOpenedAt(location);
            setOpen(!open);
          }}
          data-testid="menu-toggle"
        >
          <span aria-hidden="true">☰</span> {t("nav.menu")}
        </button>
      )}
      {subject && (
        <div className="top-menu" id="top-menu">
          <nav aria-label={t("nav.main")}>
            <NavLink href="/">{t("nav.board")}</NavLink>
            <NavLink href="/jobs" data-testid="nav-jobs">
              {t("nav.jobs")}
            </NavLink>
            <NavLink href="/audit">{t("nav.audit")}</NavLink>
            <NavLink href="/remaining">{t("nav.remaining")}</NavLink>
            <NavLink href="/reconcile">{t("nav.reconcile")}</NavLink>
            <NavLink href="/waitlist">{t("nav.waitlist")}</NavLink>
            <NavLink href="/insights">{t("nav.insights")}</NavLink>
            {atLeast(subject, "admin") && (
              <NavLink href="/admin" data-testid="nav-admin">
                {t("nav.admin")}
              </NavLink>
            )}
            {atLeast(subject, "admin") && <SimLink />}
          </nav>
          <span className="spacer" />
          <WhoAmI subject={subject} />
        </div>
      )}
      {!subject && <span className="spacer" />}
      <LangSwitch />
    </header>
  );
}

/** NavLink is a navigation link that says which page is open (aria-current, styled by it). */
function NavLink({ href, children, ...rest }: { href: string; children: ReactNode } & Record<`data-${string}`, string>) {
  const [loc] = useLocation();
  const on = href === "/" ? loc === "/" || loc.startsWith("/slots") : loc === href || loc.startsWith(`${href}/`);
  return (
    <Link href={href} aria-current={on ? "page" : undefined} {...rest}>
      {children}
    </Link>
  );
}

/** SimLink offers the Simulator page to an admin, only when the server runs the simulators (issue 27 item 12). */
function SimLink() {
  const t = useT();
  const probe = useLoad("sim-probe", "once", (signal) => simService.faults(signal));
  if (!probe.data) return null;
  return (
    <NavLink href="/simulator" data-testid="nav-simulator">
      {t("nav.simulator")}
    </NavLink>
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
    // The new page starts at its top: the board may have been scrolled far
    // down, and focusing <main> with scrolling put its top under the sticky
    // header (issue 27 item 1: a slot's name and state were hidden on arrival).
    window.scrollTo(0, 0);
    document.getElementById("main")?.focus({ preventScroll: true });
  }, [location]);
  return null;
}

/** NotFoundPage: an unknown route says so instead of silently showing the board (issue 14). */
function NotFoundPage() {
  const t = useT();
  const [path] = useLocation();
  return (
    <section data-testid="route-not-found" role="alert">
      <h1>{t("route.not_found", { path })}</h1>
      <Link href="/">{t("route.to_board")}</Link>
    </section>
  );
}

const TITLES: [RegExp, Key][] = [
  [/^\/$/, "nav.board"],
  [/^\/jobs$/, "nav.jobs"],
  [/^\/audit/, "nav.audit"],
  [/^\/remaining/, "nav.remaining"],
  [/^\/reconcile/, "nav.reconcile"],
  [/^\/waitlist/, "nav.waitlist"],
  [/^\/insights/, "nav.insights"],
  [/^\/admin/, "nav.admin"],
  [/^\/simulator/, "nav.simulator"],
  [/^\/account/, "nav.account"],
];

/** RouteTitle names the tab after the page; the job and wait pages set their own, with the job's state. */
function RouteTitle() {
  const t = useT();
  const [path] = useLocation();
  useEffect(() => {
    if (path.startsWith("/jobs/")) return;
    const slot = /^\/slots\/([^/]+)/.exec(path);
    const hit = TITLES.find(([re]) => re.test(path));
    setTab(slot ? decodeURIComponent(slot[1] ?? "") : hit ? t(hit[1]) : t("route.not_found_short"));
  }, [path, t]);
  return null;
}

/**
 * Shortcuts: "/" focuses the page's search box, "g" then b/j/a/w/i goes to
 * the board, jobs, audit, waitlist or insights (as GitHub does); never while
 * typing in a field.
 */
function Shortcuts() {
  const [, navigate] = useLocation();
  useEffect(() => {
    let g = false;
    const onKey = (e: KeyboardEvent): void => {
      const el = e.target as HTMLElement | null;
      if (e.ctrlKey || e.metaKey || e.altKey || (el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName)))) return;
      if (document.querySelector("dialog[open]")) return;
      if (g) {
        g = false;
        const to = ({ b: "/", j: "/jobs", a: "/audit", w: "/waitlist", i: "/insights" } as Record<string, string>)[e.key];
        if (to) {
          e.preventDefault();
          navigate(to);
        }
        return;
      }
      if (e.key === "g") g = true;
      else if (e.key === "/") {
        const box = document.querySelector<HTMLInputElement>("main input[type=search]");
        if (box) {
          e.preventDefault();
          box.focus();
        }
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [navigate]);
  return null;
}

// Pages few people open load on first visit (issue 35: the initial JS stays
// under 150 KB gzip with the component library and the timeline in it).
const AdminPage = lazy(() => import("./pages/AdminPage").then((m) => ({ default: m.AdminPage })));
const InsightsPage = lazy(() => import("./insights/InsightsPage").then((m) => ({ default: m.InsightsPage })));
const ReconcilePage = lazy(() => import("./pages/ReconcilePage").then((m) => ({ default: m.ReconcilePage })));
const SimulatorPage = lazy(() => import("./sim/SimulatorPage").then((m) => ({ default: m.SimulatorPage })));
const AuditPage = lazy(() => import("./pages/AuditPage").then((m) => ({ default: m.AuditPage })));
const JobsPage = lazy(() => import("./pages/JobsPage").then((m) => ({ default: m.JobsPage })));
const RemainingPage = lazy(() => import("./pages/RemainingPage").then((m) => ({ default: m.RemainingPage })));
const WaitlistPage = lazy(() => import("./waitlist/WaitlistPage").then((m) => ({ default: m.WaitlistPage })));
const AccountPage = lazy(() => import("./pages/AccountPage").then((m) => ({ default: m.AccountPage })));

/** Lazy shows a page loaded on first use, saying so while it loads. */
function Lazy({ page: Page }: { page: ComponentType }) {
  const t = useT();
  return (
    <Suspense fallback={<p role="status">{t("common.loading")}</p>}>
      <Page />
    </Suspense>
  );
}

function Routes() {
  return (
    <Switch>
      <Route path="/">
        <Board />
      </Route>
      <Route path="/slots/:name/reset">{(p) => <ResetLookup key={p.name} slot={p.name} />}</Route>
      <Route path="/slots/:name/at/:at">{(p) => <SlotAsOfPage key={`${p.name}@${p.at}`} name={p.name} at={decodeAt(p.at)} />}</Route>
      <Route path="/slots/:name">{(p) => <SlotPage key={p.name} name={p.name} />}</Route>
      <Route path="/jobs">
        <Lazy page={JobsPage} />
      </Route>
      <Route path="/jobs/:id/wait">{(p) => <WaitView key={p.id} id={p.id} />}</Route>
      <Route path="/jobs/:id">{(p) => <JobPage key={p.id} id={p.id} />}</Route>
      <Route path="/audit">
        <Lazy page={AuditPage} />
      </Route>
      <Route path="/remaining">
        <Lazy page={RemainingPage} />
      </Route>
      <Route path="/reconcile">
        <Lazy page={ReconcilePage} />
      </Route>
      <Route path="/admin">
        <Lazy page={AdminPage} />
      </Route>
      <Route path="/account">
        <Lazy page={AccountPage} />
      </Route>
      <Route path="/waitlist">
        <Lazy page={WaitlistPage} />
      </Route>
      <Route path="/insights">
        <Lazy page={InsightsPage} />
      </Route>
      <Route path="/simulator">
        <Lazy page={SimulatorPage} />
      </Route>
      <Route>
        <NotFoundPage />
      </Route>
    </Switch>
  );
}

/** SessionGate shows the routes to a signed-in tab and the sign-in page otherwise. */
function SessionGate({ auth }: { auth: AuthState }) {
  const t = useT();
  switch (auth.status) {
    case "checking":
      return (
        <p role="status" data-testid="auth-checking">
          {t("auth.checking")}
        </p>
      );
    case "unreachable":
      return (
        <div className="error" role="alert" data-testid="auth-unreachable">
          <p>{t("auth.unreachable", { message: apiErrorText(auth.error, t) })}</p>
          <button type="button" onClick={() => void checkSession(true)}>
            {t("common.retry")}
          </button>
        </div>
      );
    case "signed_out":
      return <SignIn methods={auth.methods} expired={auth.expired} />;
    case "signed_in":
      return (
        <>
          <RouteTitle />
          <Shortcuts />
          <Routes />
        </>
      );
  }
}

/** App is the shell: header with the live indicator and who is signed in, the one banner, the routes. */
export function App() {
  const auth = useAuth();
  const subject = auth.status === "signed_in" ? auth.subject : undefined;
  return (
    <Router hook={useHashPathLocation} hrefs={hashHrefs}>
      <FocusOnNavigate />
      <Header subject={subject} />
      {subject && <ConnectionBanner />}
      {subject && <DeadlineBanner />}
      <Announcer />
      <main id="main" tabIndex={-1}>
        <SessionGate auth={auth} />
      </main>
    </Router>
  );
}
