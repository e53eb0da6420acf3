#!/usr/bin/env bash
# Issue 32: eight ready resets at once against the simulators on a fake
# clock (60-second builds, concurrent_builds 2, Coolify's 200/min budget on the
# same clock): ready without a resume,
# requests per reset, 429s and the peak requests per simulated minute, and
# the simulated time against the least possible (four build rounds, 240 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -run '^$' -bench 'BenchmarkMondayMorning' -benchtime=1x -timeout 10m ./backend/jobs/ 2>&1 |
  grep -E '^monday-morning|^(ok|FAIL|---)' || { echo "monday-morning bench failed"; exit 1; }
