#!/usr/bin/env bash
# Audit by replay (projections/bench BenchmarkAsOf, issue 28): the time of
# an "as of" answer (GET /api/slots/{name}?at=: SlotAsOf + JSON) for a slot
# with BENCH_ASOF_SMALL (default 100) and BENCH_ASOF_LARGE (default 20000)
# events in its streams, in a bbolt log of BENCH_ASOF_LOG (default 1000000)
# events of the realistic mix, with the ratio from the same run. The log
# lives under /tmp and is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -run '^$' -bench 'AsOf' -benchtime 1x -timeout 30m ./projections/bench >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep '^FIGURE' "$out" | sed 's/^FIGURE //'
grep -q 'as of: .* ÷ ' "$out" || { echo "asof bench: missing figures"; cat "$out"; exit 1; }
