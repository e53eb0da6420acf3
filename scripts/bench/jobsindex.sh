#!/usr/bin/env bash
# Engine index start-up (issue 13, "consumers start from checkpoints"): time
# from NewEngine to the index having folded the head of a bbolt log of
# BENCH_INDEX_EVENTS (default 200000; 1000000 for the issue's target) events
# of the realistic mix: from 0 (the baseline of the same run: the first
# start, no checkpoint yet), from the checkpoint Stop wrote, and from one
# 9,000 events behind.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -run '^$' -bench 'BenchmarkIndexStart' -benchtime 1x -timeout 30m ./backend/jobs/ >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep '^index start' "$out"
