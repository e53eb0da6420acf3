#!/usr/bin/env bash
# Providers: abort latency of cancelled provider calls (DESIGN.md invariant 2).
# 1,000 hung HTTP calls (Coolify GET/DELETE, Bitbucket GET) and 50 hung git
# pushes against the simulator, each cancelled at a random moment; prints
# p50/p99 from cancel to the client returning and to the simulator recording
# the abort, requests started after cancel (must be 0), and ratios against
# normal calls measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
go run ./backend/providers/internal/cancelbench -trials "${TRIALS:-1000}" -git-trials "${GIT_TRIALS:-50}"
