#!/usr/bin/env bash
# Authentication overhead (issue 11): GET /api/slots and a command (extend)
# with a bearer token against the same call on a server with authentication
# off, interleaved in the same run; prints both times and the ratio
# (target <= 1.1). The directory holds 1,000 tokens and 100 accounts.
# The command runs fewer times: each extend lengthens the slot's stream.
set -euo pipefail
cd "$(dirname "$0")/../.."
for spec in slots:20000x command:2000x; do
  go test -run '^$' -bench "BenchmarkAuthOverhead/${spec%%:*}\$" -benchtime="${spec##*:}" -timeout 10m ./backend/httpapi/ 2>&1 |
    grep -E '^Benchmark|^(FAIL|---)' || { echo "auth bench failed"; exit 1; }
done
