#!/usr/bin/env bash
# Engine memory benchmark (issue 13, "finished jobs leave memory"): private
# memory (RssAnon) and Go heap an engine adds once it has folded a bbolt log of
# N finished jobs, at N and 5×N, each against the same process's figures with
# the store open and no engine (baseline of the same run).
#   BENCH_INDEX_JOBS  N (default 10000)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -run '^$' -bench 'BenchmarkIndexMemory' -benchtime 1x -timeout 15m ./backend/jobs/ >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep '^index memory' "$out"
