#!/usr/bin/env bash
# Installs the system packages the tests need when they are missing:
# PostgreSQL server binaries (the throwaway test cluster), git, Debian's
# Chromium (browser tests), and a C compiler with the C library's headers
# (`go test -race` needs cgo; without a compiler Go turns cgo off and the
# race build stops with "-race requires cgo"). `make test` and .ci/prepare both call it, so a
# fresh clone needs no step the README does not name. Without root (or
# passwordless sudo) it stops at once with the exact command to run.
set -euo pipefail
need=()
command -v git >/dev/null || need+=(git)
command -v "${CC:-gcc}" >/dev/null || need+=(gcc)
[ -e /usr/include/stdlib.h ] || need+=(libc6-dev)
command -v "${CHROMIUM:-chromium}" >/dev/null || [ -x "${CHROMIUM:-/usr/bin/chromium}" ] || need+=(chromium)
if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && [ -z "${TEST_DATABASE_URL:-}" ]; then
  need+=(postgresql)
fi
[ ${#need[@]} -eq 0 ] && exit 0
cmd="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${need[*]}"
if [ "$(id -u)" -eq 0 ]; then
  echo "installing: ${need[*]}"
  bash -c "$cmd"
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  echo "installing with sudo: ${need[*]}"
  sudo -n bash -c "$cmd"
else
  echo "missing system packages: ${need[*]}" >&2
  echo "install them with:  sudo bash -c '$cmd'" >&2
  exit 1
fi
