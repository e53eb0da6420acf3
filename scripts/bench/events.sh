#!/usr/bin/env bash
# Event store benchmarks (events/boltstore): append throughput against this
# disk's raw fdatasync rate measured in the same run, catch-up read+decode
# over 1,000,000 events, and opening that store (after a clean close and after a
# kill: Open until the first append committed). Prints one figure per line.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Appends: 7 interleaved rounds of raw fsync / 1 appender / 32 appenders,
# medians (a shared disk's fsync rate swings within seconds). The stores live
# in TMPDIR, like the raw fsync probe.
go test -count=1 -run '^$' -bench 'AppendVsFsync' -benchtime 1x ./events/boltstore >"$out" 2>&1 || { cat "$out"; exit 1; }
# One process for both: the million-event store is generated once.
go test -count=1 -run '^$' -bench 'CatchUp|Open' -benchtime 2s ./events/boltstore >>"$out" 2>&1 || { cat "$out"; exit 1; }
awk '
function metric(line, unit,   n, i, f) {
  n = split(line, f, /[ \t]+/)
  for (i = 2; i <= n; i++) if (f[i] == unit) return f[i-1]
  return ""
}
/^BenchmarkAppendVsFsync/ {
  fsync = metric($0, "fsyncs/s"); a1 = metric($0, "events/s-1"); a32 = metric($0, "events/s-32")
  c32 = metric($0, "events/commit-32"); r32 = metric($0, "x-raw-fsync-32")
}
/^BenchmarkCatchUp/          { cu = metric($0, "events/s"); fill = metric($0, "fill-s") }
/^BenchmarkOpen-/            { op = metric($0, "ms/open-clean"); fa = metric($0, "ms/first-append-clean"); fk = metric($0, "ms/first-append-killed")
                               ok = metric($0, "ms/open-killed"); xk = metric($0, "x-killed/clean"); mib = metric($0, "file-MiB")
                               bo = metric($0, "ms/bolt-open"); pr = metric($0, "ms/prepare") }
/^BenchmarkOpenAfterCrash/   { oc = metric($0, "ms/open"); tail = metric($0, "tail-events") }
END {
  if (fsync == "" || a1 == "" || a32 == "" || cu == "" || op == "" || fk == "" || oc == "") { print "events bench: missing figures"; exit 1 }
  # A bbolt commit is two fdatasyncs (pages, then the meta page).
  printf "raw fsync baseline (64 B write + fdatasync, same disk, median): %8.0f fsyncs/s\n", fsync
  printf "append, 1 appender (median):                  %8.0f events/s  %5.2fx raw fsync rate\n", a1, a1/fsync
  printf "append, 32 appenders, group commit (median):  %8.0f events/s  (target >= 20000)\n", a32
  printf "append, 32 appenders, batch size (median):    %8.1f events/commit = %.1f events/fsync\n", c32, c32/2
  printf "append, 32 appenders vs raw fsync (median of per-round ratios): %.2fx\n", r32
  printf "catch-up SubscribeAll + events.Decode, 1M events: %8.0f events/s  (target >= 300000)\n", cu
  printf "open 1M-event store until ready, after a clean close (warm cache): %8.2f ms  (%.0f MiB file; target < 5000 ms)\n", op, mib
  printf "  ... of which bbolt open with its 1 GiB mapping %.2f ms, format check + index tail %.2f ms\n", bo, pr
  printf "open -> first append committed, after a clean close (marker, no page check): %8.2f ms  (target <= 1000 ms)\n", fa
  printf "open -> first append committed, after a kill (full page check first):       %8.2f ms  = %.0fx the clean close (ready to read: %.2f ms)\n", fk, xk, ok
  printf "open after a crash, rebuilding a %d-event index tail: %.2f ms\n", tail, oc
  printf "generating the 1M events (8 appenders x 500-event appends): %.1f s\n", fill
}' "$out"
