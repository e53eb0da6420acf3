// Links to a moment of the log (issue 28): the dashboard's "as of" routes.
const enc = encodeURIComponent;

/**
 * momentHref is the dashboard's link to "the slot at this moment" (a log
 * position, or an RFC 3339 time). A path segment, not ?at=: the dashboard
 * routes on the hash, and its router keeps a real query string across
 * later navigations, so every other page would stay "as of".
 */
export function momentHref(slot: string, at: string | number): string {
  return `/slots/${enc(slot)}/at/${enc(String(at))}`;
}

/** fromLocalInput turns a datetime-local field's value into an RFC 3339 time (local time zone); "" if invalid. */
export function fromLocalInput(v: string): string {
  const ms = Date.parse(v);
  return Number.isNaN(ms) || v === "" ? "" : new Date(ms).toISOString();
}
