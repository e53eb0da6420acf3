#!/usr/bin/env bash
# The ready reset (issue 23): a reset's wall time against the simulators,
# split per step, as a ratio to the old reset (deletes and force push only)
# measured in the same run. SLOTKEEPER_BENCH_RESETS sets resets per kind.
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -run '^$' -bench 'BenchmarkReadyReset' -benchtime=1x -timeout 10m ./backend/jobs/ 2>&1 |
  grep -E '^ready-reset|^(ok|FAIL|---)' || { echo "ready bench failed"; exit 1; }
