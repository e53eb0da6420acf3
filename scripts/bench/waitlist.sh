#!/usr/bin/env bash
# Waitlist hand-over (issue 17): 1,000 waiting people, 100 slots cycling.
# Time from a reset's success (the SlotVacated + JobReleased append) to the
# OfferMade change on a live SSE stream of the real server (p50, p99),
# against the plain SSE change latency of the reset's own change measured in
# the same cycles; p99-ratio = offer p99 / plain p99.
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -run '^$' -bench 'BenchmarkWaitlistHandOver$' -benchtime=500x -timeout 10m ./backend/httpapi/ 2>&1 |
  grep -E '^Benchmark|^(FAIL|---)' || { echo "waitlist bench failed"; exit 1; }
# Start-up of the waitlist consumer and the insights read model (issue 13):
# Run until caught up on a generated log of $EVENTS events (default
# 200,000), from position 0 and then from the checkpoint the first run left,
# in the same run; *-ratio = from 0 / from the checkpoint.
go test -run '^$' -bench 'BenchmarkConsumerStart$' -benchtime=1x -timeout 10m ./backend/waitlist/ 2>&1 |
  grep -E '^Benchmark|^(FAIL|---)' || { echo "consumer start bench failed"; exit 1; }
