#!/usr/bin/env bash
# Backup and export benchmarks (backend/backup, events/ndjson): backup
# throughput against a plain file copy of the same store, and export
# events/s against a bare catch-up, each measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -count=1 -run '^$' -bench 'BackupVsCopy|ExportVsCatchUp' -benchtime 3x ./backend/backup >"$out" 2>&1 || { cat "$out"; exit 1; }
awk '
function metric(line, unit,   n, i, f) {
  n = split(line, f, /[ \t]+/)
  for (i = 2; i <= n; i++) if (f[i] == unit) return f[i-1]
  return ""
}
/^BenchmarkBackupVsCopy/    { mb = metric($0, "file-MB"); cp = metric($0, "copy-MB/s"); bk = metric($0, "backup-MB/s"); xr = metric($0, "x-copy") }
/^BenchmarkExportVsCatchUp/ { cu = metric($0, "catchup-events/s"); ex = metric($0, "export-events/s"); xe = metric($0, "x-catchup") }
END {
  if (cp == "" || bk == "" || cu == "" || ex == "") { print "backup bench: missing figures"; exit 1 }
  printf "plain copy of a %.0f MB store (fsync):   %8.0f MB/s (baseline)\n", mb, cp
  printf "backup archive of it (fsync):          %8.0f MB/s  %.2fx the copy\n", bk, xr
  printf "catch-up SubscribeAll, 200k events:    %8.0f events/s (baseline)\n", cu
  printf "NDJSON export of the same log:         %8.0f events/s  %.2fx catch-up\n", ex, xe
}' "$out"
