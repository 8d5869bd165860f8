#!/usr/bin/env bash
# Why this file exists: `make test` needs two things pip cannot install. The book's browser test drives
# Debian's chromium (never a downloaded browser build), and a CJK font lets its Chinese pages draw characters
# instead of boxes. This installs whichever is missing through apt-get, as root or with passwordless sudo, and
# otherwise stops before any test runs, printing the one command that installs them.
set -euo pipefail

need=()
if [ -n "${CHROMIUM:-}" ]; then  # tests/book/test_book.py uses $CHROMIUM when set
  [ -x "$CHROMIUM" ] || { echo "CHROMIUM=$CHROMIUM is not an executable" >&2; exit 1; }
else
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk" || need+=(fonts-wqy-microhei)
[ ${#need[@]} -eq 0 ] && exit 0

cmd="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${need[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "make test needs ${need[*]} (Debian package names), and this system has no apt-get:" \
       "install them with its package manager, or set CHROMIUM=/path/to/chromium" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "make test needs ${need[*]} (the book's browser test); run this once, then make test again:" >&2
  echo "  sudo sh -c 'apt-get update && apt-get install -y ${need[*]}'" >&2
  exit 1
fi
echo "installing ${need[*]} with apt-get (the book's browser test needs them)"
"${sudo[@]}" sh -c "$cmd"
command -v chromium >/dev/null 2>&1 || [ -n "${CHROMIUM:-}" ] \
  || { echo "apt-get ran, but there is still no chromium on PATH" >&2; exit 1; }
