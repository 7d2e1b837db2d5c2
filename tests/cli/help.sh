#!/usr/bin/env bash
# kvedge starts: `--help` exits 0 with the usage on stdout and nothing from a
# sanitizer on stderr. The fuzz build (clang, ASan) once died before main
# (libhwy's static init freed, through mimalloc, a block ASan had allocated).
# Usage: help.sh KVEDGE_COMMAND...
set -u
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" --help >"$out" 2>"$err"
rc=$?
if [[ $rc -ne 0 ]]; then echo "FAIL: '$* --help' exited $rc:"; cat "$err"; exit 1; fi
if [[ -s "$err" ]]; then echo "FAIL: '$* --help' wrote to stderr:"; cat "$err"; exit 1; fi
if ! grep -q '^Usage: .* SUBCOMMAND' "$out"; then echo "FAIL: no usage line:"; cat "$out"; exit 1; fi
echo "ok: $(grep '^Usage:' "$out")"
