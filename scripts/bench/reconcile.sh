#!/usr/bin/env bash
# Reconciliation benchmark (backend/reconcile): one run over 10,000 provider
# resources and 1,000 slots in the simulators through the real clients; its
# time and its provider calls against the minimum possible (two per Coolify
# project plus two team lists, one per Bitbucket page).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -count=1 -run '^$' -bench 'Reconcile10k|StandingFindings' -benchtime 3x ./backend/reconcile >"$out" 2>&1 || { cat "$out"; exit 1; }
awk '
function metric(line, unit,   n, i, f) {
  n = split(line, f, /[ \t]+/)
  for (i = 2; i <= n; i++) if (f[i] == unit) return f[i-1]
  return ""
}
/^BenchmarkReconcile10k/ { s = metric($0, "s/run"); c = metric($0, "calls/run"); m = metric($0, "min-calls"); x = metric($0, "x-min") }
/^BenchmarkStandingFindings/ { e = metric($0, "events/run"); f = metric($0, "full-list-events/run"); r = metric($0, "x-fewer") }
END {
  if (s == "" || c == "") { print "reconcile bench: missing figures"; exit 1 }
  printf "reconcile run, 10,000 resources / 1,000 slots: %.2f s\n", s
  printf "provider calls per run: %d (minimum %d): %.2fx the minimum\n", c, m, x
  if (e != "") printf "events appended per run, 1,000 standing orphans + 1 new: %.1f (recording every finding: %d): %.1fx fewer\n", e, f, r
}' "$out"
