// DeadlineBanner: on every page, the signed-in person's deadline warnings
// (DeadlineWarning events in force) with a link to extend on the waitlist
// page. Reloads only when the stream shows a relevant event.
import { Link, useLocation } from "wouter";
import { Countdown } from "../components/Countdown";
import { useT } from "../i18n";
import { useSubject } from "../auth/session";
import { useWaitlist } from "./useWaitlist";

export function DeadlineBanner() {
  const [location] = useLocation();
  // The waitlist page shows the same warnings with their extend buttons.
  return location === "/waitlist" ? null : <Banner />;
}

function Banner() {
  const t = useT();
  const me = useSubject();
  const wl = useWaitlist("waitlist-banner");
  const mine = me ? (wl.data?.warnings ?? []).filter((w) => w.occupant === me.name) : [];
  if (mine.length === 0) return null;
  return (
    <div className="banner warning" role="status" data-testid="deadline-banner">
      {mine.map((w) => (
        <p key={w.slot + w.deadline}>
          {t("waitlist.warning", { slot: w.slot })} <Countdown until={w.deadline} />{" "}
          <Link href="/waitlist">{t("waitlist.extend_here")}</Link>
        </p>
      ))}
    </div>
  );
}
