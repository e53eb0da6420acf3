#!/usr/bin/env bash
# Read-model benchmarks (projections/bench): replay throughput from the
# embedded bbolt log into the memory and PostgreSQL read models, and the lag
# from an acknowledged append to the change on the runner's feed. Each figure
# is printed with a baseline from the same run (raw store catch-up, catch-up +
# decode, append latency) as a ratio. PostgreSQL is a throwaway cluster from
# the system binaries (or TEST_DATABASE_URL).
#   BENCH_PROJECTION_EVENTS     size of the generated log (default 200000)
#   BENCH_PROJECTION_PG_EVENTS  prefix of it replayed into PostgreSQL (default 60000)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -run '^$' -bench 'Replay|Lag' -benchtime 1x -timeout 10m ./projections/bench >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep '^FIGURE' "$out" | sed 's/^FIGURE //'
grep -q 'replay into memory' "$out" && grep -q 'lag append' "$out" || { echo "projections bench: missing figures"; cat "$out"; exit 1; }
