#!/usr/bin/env bash
# Live-stream benchmarks (issue 6): Slotkeeper's SSE hub against r3labs/sse's
# server in its default configuration, measured in the same run on loopback,
# both fed by the real pipeline (bbolt store → projections runner → memory
# read model). Each server runs as a child process so its RSS can be read.
#
# Figures: latency from append to receipt (1 client = the pipeline's floor,
# then CLIENTS × RATE), one stalled client among CLIENTS (time to eviction,
# the others' p99), and RSS per idle connection at IDLE connections.
# Scale with env: CLIENTS (1000) RATE (50) DURATION (4s) ROUNDS (3) IDLE (10000,40000: a baseline count, then the count measured against it)
# STORE (bolt | mem: the in-memory store, to take fsync out of the latency)
# PIN (1: servers on core 0, clients on the other cores; 0: unpinned).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(mktemp -d)/ssebench
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./backend/cmd/ssebench
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), RLIMIT_NOFILE $(ulimit -n)"
# The servers on core 0, the benchmark's own clients on the others
# (issue 37 item 1: 1,000 client goroutines sharing the server's two cores
# measured the machine, not the hub). PIN=0 runs them unpinned.
pin=()
if [ "${PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  pin=(taskset -c "1-$(( $(nproc) - 1 ))")
  set -- -pin-server 0
fi
echo "servers pinned apart from the clients: ${pin[*]:-no}"
"${pin[@]}" "$bin" "$@" -clients "${CLIENTS:-1000}" -rate "${RATE:-50}" -duration "${DURATION:-4s}" -rounds "${ROUNDS:-3}" -idle "${IDLE:-10000,40000}" -store "${STORE:-bolt}"
