#!/usr/bin/env bash
# Cost of `serve` as the log grows (issue 13): private memory (RssAnon from
# /proc/PID/status, i.e. not the mapped store file) of a server that has
# projected the log, and the time from exec to /readyz 200 on a restart (page
# cache warm), on an empty log, at 100k and at 1M events of projtest's
# realistic mix (backend/cmd/loggen writes them straight into the store;
# the same pool of 256 slots, ten times the finished history).
# Baselines of the same run: the empty log, and the same figures for the
# binary built from BENCH_BASE_REV (default: main; skipped when it is this
# commit) on the same files.
#   BENCH_HISTORY_SMALL  first size (default 100000)
#   BENCH_HISTORY_LARGE  second size (default 1000000)
#   BENCH_BASE_REV       git revision of the baseline binary ("" : none)
set -euo pipefail
cd "$(dirname "$0")/../.."
small=${BENCH_HISTORY_SMALL:-100000}
large=${BENCH_HISTORY_LARGE:-1000000}
base_rev=${BENCH_BASE_REV-main}
work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/loggen" ./backend/cmd/loggen
go build -o "$work/slotkeeper" ./backend/cmd/slotkeeper
bins=(slotkeeper)
if [ -n "$base_rev" ] && [ "$(git rev-parse "$base_rev^{tree}" 2>/dev/null)" != "$(git rev-parse 'HEAD^{tree}')" ] \
   && git rev-parse -q --verify "$base_rev^{commit}" >/dev/null; then
  mkdir "$work/base-src"
  git archive "$base_rev" | tar -x -C "$work/base-src"
  (cd "$work/base-src" && go build -o "$work/baseline" ./backend/cmd/slotkeeper)
  bins=(baseline slotkeeper)
fi

# start BIN DIR: starts serve on a free port, waits for /readyz 200, sets pid,
# listen_ms (exec → listening: the read model caught up) and ready_ms (exec →
# /readyz 200: also the store's write probe, which waits for the embedded
# store's background page check of a big file).
start() {
  local bin=$1 dir=$2 t0 url=""
  listen_ms=0
  rm -f "$work/out"
  t0=$(date +%s%N)
  "$work/$bin" serve --data "$dir" --addr 127.0.0.1:0 --workers 0 --deadline-reset=false --warn-before "" \
    --reconcile-every 0 --demo=false --sim on --log-level info --drain-delay 0s >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 1 6000); do
    if [ -z "$url" ]; then
      url=$(sed -n 's/^slotkeeper: serving on \(http[^ ]*\).*/\1/p' "$work/out")
      [ -n "$url" ] && listen_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    fi
    if [ -n "$url" ] && curl -sf -o /dev/null "$url/readyz"; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "serve exited:"; cat "$work/err"; exit 1; fi
    sleep 0.005
  done
  ready_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}

stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

rss_kb() { awk '/^RssAnon:/ {print $2}' "/proc/$pid/status"; }

# settled: waits until every consumer of the log has caught up and the
# server handed the catch-up's garbage back ("consumers caught up" in its
# log; a binary without that line gets 2 s).
settled() {
  for _ in $(seq 1 12000); do
    grep -q 'consumers caught up' "$work/err" && return
    sleep 0.01
  done
  echo "  (no 'consumers caught up' line: reading memory as it is)"
}

# measure BIN DIR LABEL: a first start (rebuilds from the log), settles, reads
# the private memory; then a restart, timed.
measure() {
  local bin=$1 dir=$2 label=$3 rss
  start "$bin" "$dir"
  if grep -q 'catch-up memory returned' "$work/$bin"; then settled; else sleep 2; fi
  rss=$(rss_kb)
  stop
  start "$bin" "$dir"
  stop
  printf '%-10s %-9s RssAnon %7.1f MB  restart: listening %6d ms, /readyz %6d ms\n' "$bin" "$label" "$(echo "$rss/1024" | bc -l)" "$listen_ms" "$ready_ms"
  eval "rss_${bin}_${label}=$rss ready_${bin}_${label}=$ready_ms listen_${bin}_${label}=$listen_ms"
}

# Two logs of the same pool (loggen keeps each generator's pool size), one
# ten times longer: what grows between them is finished history.
mkdir "$work/empty"
for b in "${bins[@]}"; do measure "$b" "$work/empty" empty; done
"$work/loggen" --data "$work/small" --events "$small" | sed 's/^/  /'
for b in "${bins[@]}"; do measure "$b" "$work/small" small; done
rm -rf "$work/small"
"$work/loggen" --data "$work/large" --events "$large" | sed 's/^/  /'
for b in "${bins[@]}"; do measure "$b" "$work/large" large; done

for b in "${bins[@]}"; do
  eval "e=\$rss_${b}_empty s=\$rss_${b}_small l=\$rss_${b}_large rs=\$ready_${b}_small rl=\$ready_${b}_large ls=\$listen_${b}_small ll=\$listen_${b}_large"
  printf '%s: RssAnon empty %.1f MB, %d events %.1f MB, %d events %.1f MB; large/small %.2f (target <= 1.5); at %d: %s (target <= 150 MB)\n' \
    "$b" "$(echo "$e/1024" | bc -l)" "$small" "$(echo "$s/1024" | bc -l)" "$large" "$(echo "$l/1024" | bc -l)" "$(echo "$l/$s" | bc -l)" "$large" \
    "$([ $((l / 1024)) -le 150 ] && echo met || echo NOT MET)"
  printf '%s: restart to listening %d ms at %d, %d ms at %d; to /readyz %d ms at %d, %d ms at %d (target <= 1000 ms: %s)\n' \
    "$b" "$ls" "$small" "$ll" "$large" "$rs" "$small" "$rl" "$large" "$([ "$rl" -le 1000 ] && echo met || echo NOT MET)"
done
