#!/usr/bin/env bash
# Slot aggregate benchmark (issue 13, "aggregates load in constant time"):
# median `extend` on a slot whose stream holds 100,000 events against the same
# command on a fresh slot, on the embedded bbolt store, in one run. Baseline
# from the same run: a full fold of the long stream (the cost of every command
# before the SlotCache).
#   BENCH_SLOT_EVENTS  events in the long slot's stream (default 100000)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -run '^$' -bench 'BenchmarkExtendLongHistory' -benchtime 1x -timeout 10m ./backend/slots/ >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep '^slots extend' "$out"
awk '/^slots extend: / { for (i = 1; i <= NF; i++) if ($i == "ratio") r = $(i+1) }
     END { if (r == "") { print "slots bench: no ratio"; exit 1 }
           printf "slots extend ratio %s: %s\n", r, (r + 0 <= 1.5 ? "within target (≤ 1.5)" : "OVER target (≤ 1.5)") }' "$out"
