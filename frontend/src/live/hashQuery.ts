// A page's shareable state (the audit page's filters) lives in a query
// inside the hash route, "#/audit?actor=bob&slot=birch", not in the real
// URL's query: wouter's hash navigation writes a query string into the
// real URL and keeps it on every later page (docs/frontend.md), whereas a
// link or navigation to another page replaces the whole hash, query and
// all, so this one cannot leak to other pages. The router sees the path
// without it (hashPath); a page reads it with useHashQuery and writes it
// with writeHashQuery (history.replaceState: a filter change is not a new
// history entry, and reload and a copied address keep it).
import { useSyncExternalStore } from "react";
import { useHashLocation } from "wouter/use-hash-location";

/** hashPath is a hash route's path without its query ("/audit?x=1" → "/audit"). */
export function hashPath(location: string): string {
  const i = location.indexOf("?");
  return i < 0 ? location : location.slice(0, i);
}

/** useHashPathLocation is wouter's hash location with the page's query left out of the path. */
export function useHashPathLocation(): [string, ReturnType<typeof useHashLocation>[1]] {
  const [location, navigate] = useHashLocation();
  return [hashPath(location), navigate];
}
/** hashHrefs makes a Link's href a hash one ("/jobs" → "#/jobs"), as wouter's own hash hook does. */
export const hashHrefs = (href: string): string => "#" + href;

function currentQuery(): string {
  if (typeof window === "undefined") return "";
  const h = window.location.hash;
  const i = h.indexOf("?");
  return i < 0 ? "" : h.slice(i + 1);
}

const listeners = new Set<() => void>();

function subscribe(l: () => void): () => void {
  listeners.add(l);
  window.addEventListener("hashchange", l);
  return () => {
    listeners.delete(l);
    window.removeEventListener("hashchange", l);
  };
}

/** useHashQuery is the current hash route's query string (without "?"), updated on every change. */
export function useHashQuery(): string {
  return useSyncExternalStore(subscribe, currentQuery, () => "");
}

/** writeHashQuery replaces the hash route's query, keeping its path; empty values are left out. */
export function writeHashQuery(values: Record<string, string>): void {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v) q.set(k, v);
  const s = q.toString();
  const h = window.location.hash;
  const i = h.indexOf("?");
  const path = i < 0 ? h : h.slice(0, i);
  const url = new URL(window.location.href);
  url.hash = s ? `${path}?${s}` : path;
  if (url.href === window.location.href) return;
  window.history.replaceState(window.history.state, "", url.href);
  for (const l of [...listeners]) l();
}
