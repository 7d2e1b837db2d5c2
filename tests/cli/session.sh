#!/usr/bin/env bash
# `kvedge generate --session FILE`: 40 tokens in one run equal 20 tokens saved
# to FILE and 20 more from a second run that loads it (sampled, so the
# sampler's state travels too); a different KV flag is refused naming it.
# Usage: session.sh KVEDGE_COMMAND... -- MODEL_ARGS...
set -u
cmd=()
while [[ $# -gt 0 && "$1" != "--" ]]; do cmd+=("$1"); shift; done
shift
model=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(-t 1 -c 64 --policy sinks --kv int4 --temp 0.8 --top-k 0 --top-p 1)
"${cmd[@]}" generate "${model[@]}" "${common[@]}" -p "Once upon a time" -n 40 -s 5 >"$dir/one" 2>/dev/null || { echo "FAIL: single run"; exit 1; }
"${cmd[@]}" generate "${model[@]}" "${common[@]}" -p "Once upon a time" -n 20 -s 5 --session "$dir/s.kvs" >"$dir/a" 2>"$dir/err_a" ||
  { echo "FAIL: first half: $(cat "$dir/err_a")"; exit 1; }
grep -q "session saved" "$dir/err_a" || { echo "FAIL: no save reported"; exit 1; }
"${cmd[@]}" generate "${model[@]}" "${common[@]}" -p "" -n 20 -s 999 --no-echo --session "$dir/s.kvs" >"$dir/b" 2>"$dir/err_b" ||
  { echo "FAIL: second half: $(cat "$dir/err_b")"; exit 1; }
grep -q "continuing session" "$dir/err_b" || { echo "FAIL: the session was not loaded"; exit 1; }
# Each run ends its output with one newline.
joined=$(printf '%s%s' "$(cat "$dir/a")" "$(cat "$dir/b")")
if [[ "$joined" != "$(cat "$dir/one")" ]]; then
  echo "FAIL: continued output differs"; echo "one:    $(cat "$dir/one")"; echo "joined: $joined"; exit 1
fi
if "${cmd[@]}" generate "${model[@]}" "${common[@]}" --kv-keys int8 -p "" -n 1 --session "$dir/s.kvs" >/dev/null 2>"$dir/err_c"; then
  echo "FAIL: a different key format was accepted"; exit 1
fi
grep -q "key format is int4 in the file, int8" "$dir/err_c" || { echo "FAIL: $(cat "$dir/err_c")"; exit 1; }
echo "ok: continued output identical ($(wc -c <"$dir/one") bytes)"
