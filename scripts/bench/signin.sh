#!/usr/bin/env bash
# Sign-in flood (issue 33 item 1, httpapi BenchmarkSignInFlood): 100 wrong
# passwords for one account from one address at once, default argon2id
# cost; peak resident memory and /healthz latency, "before" (the old path
# re-created: every attempt hashed at once) and "after" (the real server's
# POST /api/auth/login), in the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -run '^$' -bench 'BenchmarkSignInFlood' -benchtime 1x -timeout 10m ./backend/httpapi/ >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep '^FIGURE' "$out" | sed 's/^FIGURE //'
grep -q 'sign-in flood .* after: peak' "$out" || { echo "signin bench: missing figures"; cat "$out"; exit 1; }
