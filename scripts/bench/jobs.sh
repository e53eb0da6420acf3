#!/usr/bin/env bash
# Job engine benchmarks (issue 4): fence abort latency over 1,000 randomized
# timeout trials, and exactly-once claims of 10,000 no-op jobs by 8 workers
# on the embedded bbolt store. Each prints its baseline from the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -run '^$' -bench 'BenchmarkFence|BenchmarkClaims' -benchtime=1x -timeout 10m ./backend/jobs/ 2>&1 |
  grep -E '^(fence|claims)|^Benchmark|^(ok|FAIL|---)' || { echo "jobs bench failed"; exit 1; }
