#!/usr/bin/env bash
# KurrentDB adapter benchmarks: append and catch-up throughput through the
# adapter against the in-process fake node (loopback gRPC), each reported with
# the embedded bbolt store measured in the same run and the ratio between them.
# The fake keeps events in memory (no fsync), so the adapter figures show the
# cost of client + gRPC + adapter, not of a real KurrentDB disk.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(go test -run '^$' -bench 'Kurrent' -benchtime 3x -count 1 ./events/kurrent/kurrentbench/ 2>&1) || { echo "$out"; exit 1; }
echo "$out" | awk '/^Benchmark/ {
  for (i = 2; i < NF; i++) v[$(i+1)] = $i
  name = $1; sub(/-[0-9]+$/, "", name)
  printf "%-26s adapter+fake %10.0f events/s   bolt %10.0f events/s   ratio adapter/bolt %.3f\n", name, v["kurrent-events/s"], v["bolt-events/s"], v["kurrent/bolt"]
}'
echo "claims/s with three processes: not measured (the scale-out harness is not built; see docs/kurrent.md)"
