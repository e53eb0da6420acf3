#!/usr/bin/env bash
# Runs every area's benchmark script and prints the figures. Each area's script
# measures a baseline in the same run and prints ratios (noisy 2-core machines).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for s in scripts/bench/*.sh; do
  echo "=== $(basename "$s" .sh) ==="
  bash "$s" || { echo "bench $s FAILED"; status=1; }
done
exit $status
