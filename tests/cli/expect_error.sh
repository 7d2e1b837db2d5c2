#!/usr/bin/env bash
# Runs a kvedge command that must fail cleanly: non-zero exit (not a signal or
# sanitizer abort), and a one-line 'kvedge…' error on stderr with the expected text.
# Usage: expect_error.sh EXPECTED_TEXT COMMAND [ARGS...]
set -u
expected="$1"
shift
err=$(mktemp)
"$@" >/dev/null 2>"$err"
rc=$?
msg=$(cat "$err")
rm -f "$err"
if [[ $rc -eq 0 ]]; then echo "FAIL: exit 0, expected an error containing: $expected"; exit 1; fi
if [[ $rc -ge 128 ]]; then echo "FAIL: died with signal $((rc - 128)): $msg"; exit 1; fi
if grep -qE "Sanitizer|runtime error|terminate called" <<<"$msg"; then echo "FAIL: sanitizer/abort: $msg"; exit 1; fi
if ! grep -qF -- "$expected" <<<"$msg"; then echo "FAIL: message does not contain '$expected': $msg"; exit 1; fi
line=$(grep -F -- "$expected" <<<"$msg" | head -n 1)
if [[ "$line" != kvedge* ]]; then echo "FAIL: the error line does not start with 'kvedge': $msg"; exit 1; fi
echo "ok (exit $rc): $line"
