#!/usr/bin/env bash
# Authentication overhead (issue 11): GET /api/slots and a command (extend)
# with a bearer token against the same call on a server with authentication
# off, interleaved in the same run; prints both times and the ratio
# (target <= 1.1); slots-session is the GET with a session cookie instead.
# The directory holds 1,000 tokens, 100 accounts and 1,000 sessions.
# The command runs fewer times: each extend lengthens the slot's stream.
set -euo pipefail
cd "$(dirname "$0")/../.."
for spec in slots:20000x command:2000x slots-session:20000x; do
  go test -run '^$' -bench "BenchmarkAuthOverhead/${spec%%:*}\$" -benchtime="${spec##*:}" -timeout 10m ./backend/httpapi/ 2>&1 |
    grep -E '^Benchmark|^(FAIL|---)' || { echo "auth bench failed"; exit 1; }
done
# The lookups alone: a bearer token (baseline) and a session cookie, in a
# directory of 1,000 tokens and 1,000 sessions.
go test -run '^$' -bench 'BenchmarkLookup' -benchmem -timeout 10m ./backend/auth/ 2>&1 |
  grep -E '^Benchmark|^(FAIL|---)' || { echo "lookup bench failed"; exit 1; }
