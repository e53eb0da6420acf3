#!/usr/bin/env bash
# Memory read model against finished history (projections/bench
# BenchmarkGrowth): at a log of the realistic mix of BENCH_GROWTH_SMALL
# events (default 100000) and grown to BENCH_GROWTH_LARGE (default 1000000),
# the snapshot's size and load time (beside a full replay of the same log),
# the read model's heap (replayed and loaded) and the slot list GET /api/slots
# sends, with the large ÷ small ratios from the same run. The log lives in a
# temporary directory under /tmp and is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -run '^$' -bench 'Growth' -benchtime 1x -timeout 30m ./projections/bench >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep '^FIGURE' "$out" | sed 's/^FIGURE //'
grep -q 'read model .* ÷ ' "$out" || { echo "readmodel bench: missing figures"; cat "$out"; exit 1; }
