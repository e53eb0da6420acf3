#!/usr/bin/env bash
# The pull-request flow (issue 34): a PR opened → its app URL on the PR,
# against the simulators, per phase, and the pr_deploy job alone as the
# baseline measured in the same run. SLOTKEEPER_BENCH_PRS sets the PRs.
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -run '^$' -bench 'BenchmarkPROpenedToURL' -benchtime=1x -timeout 10m ./backend/pullrequests/ 2>&1 |
  grep -E '^pr-flow|^(ok|FAIL|---)' || { echo "pull-request bench failed"; exit 1; }
