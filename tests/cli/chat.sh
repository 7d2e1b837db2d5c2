#!/usr/bin/env bash
# kvedge chat from a pipe on stories260K (no chat template: the ChatML
# fallback): one reply per line then one empty line, nothing else on stdout;
# the second turn feeds only its suffix; /reset starts again; --session
# continues exactly; Ctrl-C stops a reply and a second one quits with exit 0.
# Usage: chat.sh KVEDGE_COMMAND... (the binary, possibly behind an emulator)
set -u
model_args=(-m "$KVEDGE_SHARED/models/stories260K.bin" --tokenizer "$KVEDGE_SHARED/models/tok512.bin" -t 1 -c 256)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Two turns, greedy.
printf 'Once upon a time\nWhat did the cat do?\n' |
  "$@" chat "${model_args[@]}" --temp 0 -n 24 >"$dir/out" 2>"$dir/err" || fail "exit $?: $(cat "$dir/err")"
grep -q "warning: the model has no chat template; using ChatML" "$dir/err" || fail "no fallback warning: $(cat "$dir/err")"
# stdout: exactly two replies, each followed by an empty line.
[[ $(grep -c '^$' "$dir/out") -ge 2 && $(tail -c 2 "$dir/out" | od -An -c | tr -d ' ') == '\n\n' ]] ||
  fail "stdout is not 'reply, empty line' twice: $(od -c "$dir/out" | head)"
grep -qE "kvedge|turn|warning" "$dir/out" && fail "status on stdout: $(cat "$dir/out")"
fed1=$(sed -n 's/.*turn 1: fed \([0-9]*\) prompt tokens.*/\1/p' "$dir/err")
fed2=$(sed -n 's/.*turn 2: fed \([0-9]*\) prompt tokens.*/\1/p' "$dir/err")
[[ -n $fed1 && -n $fed2 ]] || fail "no turn status on stderr: $(cat "$dir/err")"
grep -q "fed again" "$dir/err" && fail "a turn re-fed the chat: $(cat "$dir/err")"
# Turn 2 renders turn 1 (≥ fed1 tokens) plus its own message; it feeds less.
[[ $fed2 -gt 0 ]] || fail "turn 2 fed nothing"
echo "ok: pipe, two turns (turn 1 fed $fed1 prompt tokens, turn 2 only its suffix: $fed2)"

# /reset: the same message after it gets the same greedy reply and the same feed.
printf 'Once upon a time\n/reset\nOnce upon a time\n' |
  "$@" chat "${model_args[@]}" --temp 0 -n 24 >"$dir/out" 2>"$dir/err" || fail "exit $?: $(cat "$dir/err")"
grep -q "conversation reset" "$dir/err" || fail "no reset: $(cat "$dir/err")"
r1=$(awk 'BEGIN{RS=""} NR==1' "$dir/out"); r2=$(awk 'BEGIN{RS=""} NR==2' "$dir/out")
[[ -n $r1 && "$r1" == "$r2" ]] || fail "after /reset the reply differs: '$r1' vs '$r2'"
f1=$(sed -n 's/.*turn 1: fed \([0-9]*\) prompt.*/\1/p' "$dir/err"); f2=$(sed -n 's/.*turn 2: fed \([0-9]*\) prompt.*/\1/p' "$dir/err")
[[ $f1 == "$f2" ]] || fail "after /reset turn 2 fed $f2 tokens, turn 1 $f1"
echo "ok: /reset"

# --session: two runs of one turn each continue exactly as one run of two (sampled, seeded).
printf 'Once upon a time\nWhat did the cat do?\n' |
  "$@" chat "${model_args[@]}" --seed 7 -n 24 >"$dir/straight" 2>"$dir/err" || fail "exit $?: $(cat "$dir/err")"
printf 'Once upon a time\n/save\n' | "$@" chat "${model_args[@]}" --seed 7 -n 24 --session "$dir/s.kvs" \
  >"$dir/a" 2>"$dir/err" || fail "exit $?: $(cat "$dir/err")"
[[ -f $dir/s.kvs && -f $dir/s.kvs.chat ]] || fail "no session files: $(cat "$dir/err")"
[[ $(grep -c "saved '" "$dir/err") -eq 2 ]] || fail "/save and exit did not both save: $(cat "$dir/err")"
printf 'What did the cat do?\n' | "$@" chat "${model_args[@]}" --seed 99 -n 24 --session "$dir/s.kvs" \
  >"$dir/b" 2>"$dir/err" || fail "exit $?: $(cat "$dir/err")"
grep -q "continuing" "$dir/err" || fail "the session was not restored: $(cat "$dir/err")"
cat "$dir/a" "$dir/b" | cmp -s - "$dir/straight" || fail "restored chat differs: $(cat "$dir/a" "$dir/b") vs $(cat "$dir/straight")"
echo "ok: --session restores messages, cache and sampler"

# Ctrl-C: stops the reply; a second one (or one at the prompt) quits with exit 0.
mkfifo "$dir/in"
"$@" chat "${model_args[@]}" --seed 1 -n -1 <"$dir/in" >"$dir/out" 2>"$dir/err" &
pid=$!
exec 3>"$dir/in"
echo "Once upon a time" >&3
for _ in $(seq 1 100); do  # wait until tokens stream
  [[ $(wc -c <"$dir/out") -gt 20 ]] && break
  sleep 0.1
done
kill -INT "$pid"
sleep 1
jobs -pr | grep -qx "$pid" && kill -INT "$pid"  # still running (its PID is not reused)
wait "$pid"
rc=$?
exec 3>&-
[[ $rc -eq 0 ]] || fail "Ctrl-C exit $rc: $(cat "$dir/err")"
grep -qE "Sanitizer|runtime error|terminate" "$dir/err" && fail "$(cat "$dir/err")"
if grep -q "reply stopped" "$dir/err"; then
  echo "ok: Ctrl-C stopped the reply, a second quit (exit 0)"
else
  echo "ok: the reply had ended; Ctrl-C at the prompt quit (exit 0)"
fi
