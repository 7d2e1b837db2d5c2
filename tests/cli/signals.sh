#!/usr/bin/env bash
# Ctrl-C during `kvedge generate -n -1` ends cleanly with the summary (exit 0);
# a closed stdout (piped to head) ends quietly with exit 0.
# Usage: signals.sh KVEDGE_COMMAND... (the binary, possibly behind an emulator)
set -u
model_args=(-m "$KVEDGE_SHARED/models/stories260K.bin" --tokenizer "$KVEDGE_SHARED/models/tok512.bin")
out=$(mktemp); err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

"$@" generate "${model_args[@]}" -n -1 --kv int4 -c 128 --seed 1 -t 1 >"$out" 2>"$err" &
pid=$!
for _ in $(seq 1 100); do  # wait until tokens stream
  [[ $(wc -c <"$out") -gt 200 ]] && break
  sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
if [[ $rc -ne 0 ]]; then echo "FAIL: SIGINT exit $rc: $(cat "$err")"; exit 1; fi
grep -q "interrupted" "$err" || { echo "FAIL: no 'interrupted' in summary: $(cat "$err")"; exit 1; }
grep -q "generated" "$err" || { echo "FAIL: no summary: $(cat "$err")"; exit 1; }
echo "ok: SIGINT -> exit 0 with summary"

set -o pipefail
"$@" generate "${model_args[@]}" -n 5000 --kv int4 -c 128 --seed 1 -t 1 2>"$err" | head -c 100 >/dev/null
rcs=("${PIPESTATUS[@]}")
if [[ ${rcs[0]} -ne 0 ]]; then echo "FAIL: closed stdout exit ${rcs[0]}: $(cat "$err")"; exit 1; fi
if grep -qE "Sanitizer|runtime error|terminate" "$err"; then echo "FAIL: $(cat "$err")"; exit 1; fi
echo "ok: closed stdout -> exit 0"
