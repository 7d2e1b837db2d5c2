#!/usr/bin/env bash
# kvedge chat in a real terminal: tmux runs it, send-keys types, capture-pane
# reads the screen. Checks the prompt, a streamed reply, /stats, Ctrl-C
# and /quit (Ctrl-C is tests/cli/chat.sh's).
# Usage: chat_tmux.sh KVEDGE_COMMAND... (needs tmux)
set -u
command -v tmux >/dev/null || { echo "FAIL: tmux is not installed (scripts/install-deps.sh)"; exit 1; }
sock="kvedge_chat_test_$$"
t() { tmux -L "$sock" "$@"; }
trap 't kill-server 2>/dev/null' EXIT
fail() { echo "FAIL: $*"; echo "--- screen:"; t capture-pane -p -t chat; exit 1; }
# Waits until the screen matches a regex.
wait_for() {
  for _ in $(seq 1 300); do
    t capture-pane -p -t chat | grep -qE "$1" && return 0
    sleep 0.1
  done
  fail "no '$1' on the screen"
}
cmd=$(printf '%q ' "$@")
t new-session -d -s chat -x 120 -y 40 \
  "$cmd chat -m $KVEDGE_SHARED/models/stories260K.bin --tokenizer $KVEDGE_SHARED/models/tok512.bin -t 1 -c 256 --seed 3 -n 40; echo EXIT=\$?; sleep 30"
wait_for '^> ?$'
t send-keys -t chat 'Once upon a time' Enter
wait_for '^> Once upon a time'
wait_for '^> ?$'  # the reply ended: the prompt again
t send-keys -t chat '/stats' Enter
wait_for 'kv held .* reserved; tokens held [0-9]+, evicted [0-9]+'
t send-keys -t chat '/quit' Enter
wait_for 'EXIT=0'
echo "ok: prompt, reply, /stats and /quit in a terminal"
t capture-pane -p -t chat | sed '/^$/N;/^\n$/D'
