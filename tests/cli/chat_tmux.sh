#!/usr/bin/env bash
# kvedge chat in a real terminal: tmux runs it, send-keys types, capture-pane
# reads the screen. Checks the prompt, a streamed reply, line editing (arrow-up
# recalls the previous line, which can be edited and sent), /stats, /quit, and
# --history (the lines of one run recalled in the next).
# Usage: chat_tmux.sh KVEDGE_COMMAND... (needs tmux)
set -u
command -v tmux >/dev/null || { echo "FAIL: tmux is not installed (scripts/install-deps.sh)"; exit 1; }
sock="kvedge_chat_test_$$"
t() { tmux -L "$sock" "$@"; }
trap 't kill-server 2>/dev/null' EXIT
fail() { echo "FAIL: $*"; echo "--- screen:"; t capture-pane -p -t chat; exit 1; }
# The screen now, in SCREEN. Fails at once, showing the last screen seen, when
# the chat ended unasked (its shell prints EXIT=) or the tmux server is gone:
# nothing can appear any more.
SCREEN=""
screen() {
  local now
  now=$(t capture-pane -p -t chat 2>&1) ||
    { echo "FAIL: the tmux server is gone ($now) while waiting for '$1'; the last screen:"; echo "$SCREEN"; exit 1; }
  SCREEN=$now
  [[ "$1" == EXIT* ]] || ! grep -q '^EXIT=' <<<"$SCREEN" ||
    { echo "FAIL: kvedge chat ended while waiting for '$1':"; echo "$SCREEN"; exit 1; }
}
# Waits until the screen matches a regex.
wait_for() {
  for _ in $(seq 1 300); do
    screen "$1"
    grep -qE "$1" <<<"$SCREEN" && return 0
    sleep 0.1
  done
  fail "no '$1' on the screen"
}
# Waits until the screen has N lines matching a regex.
wait_count() {
  for _ in $(seq 1 300); do
    screen "$2"
    [[ $(grep -cE "$2" <<<"$SCREEN") -ge $1 ]] && return 0
    sleep 0.1
  done
  fail "fewer than $1 lines '$2' on the screen"
}
state=$(mktemp -d)
trap 't kill-server 2>/dev/null; rm -rf "$state"' EXIT
cmd=$(printf '%q ' "$@")
chat="XDG_STATE_HOME=$state $cmd chat -m $KVEDGE_SHARED/models/stories260K.bin --tokenizer $KVEDGE_SHARED/models/tok512.bin -t 1 -c 256 --seed 3 -n 40"
# A machine whose tmux cannot open a terminal (no usable pty) cannot run this
# test at all: skipped, with tmux's own words. Anything after this is a failure.
if ! probe=$(t new-session -d -s probe -x 20 -y 5 'sleep 60' 2>&1) || ! t has-session -t probe 2>/dev/null; then
  echo "SKIP: tmux cannot run a pane on this machine ($(tmux -V); ${probe:-no message}; /dev/ptmx: $(ls -l /dev/ptmx 2>&1))"
  exit 77
fi
t kill-session -t probe
# Starts the chat in a new session named chat.
start_chat() {
  local out
  out=$(t new-session -d -s chat -x 120 -y 50 "$chat --history; echo EXIT=\$?; sleep 30" 2>&1) ||
    { echo "FAIL: tmux new-session: $out"; exit 1; }
}
start_chat
wait_for '^> ?$'
t send-keys -t chat 'Once upon a time' Enter
wait_for '^> Once upon a time'
wait_for '^> ?$'  # the reply ended: the prompt again
# Arrow-up brings the line back on the prompt; it is edited (text appended,
# Home then a word typed at the start) and sent as a new message.
t send-keys -t chat Up
wait_count 2 '^> Once upon a time$'
t send-keys -t chat ' there was' Home 'Yes. '
wait_for '^> Yes\. Once upon a time there was$'
t send-keys -t chat Enter
wait_count 3 '^>( |$)'
wait_for '^> ?$'  # the chat answered the edited line: the prompt again
reply=$(t capture-pane -p -t chat | sed -n '/^> Yes\. Once upon a time there was$/{n;p}')
[[ -n "$reply" && "$reply" != ">"* ]] || fail "no reply under the edited line"
t send-keys -t chat '/stats' Enter
wait_for 'kv held .* reserved; tokens held [0-9]+, evicted [0-9]+'
t send-keys -t chat '/quit' Enter
wait_for 'EXIT=0'
echo "ok: prompt, reply, arrow-up recall and editing, /stats and /quit in a terminal"
t capture-pane -p -t chat | sed '/^$/N;/^\n$/D'
[[ $(stat -c %a "$state/kvedge/chat_history") == 600 ]] || fail "the history file is not private (mode 600)"

# A second run with --history recalls the first run's lines, newest first.
t kill-session -t chat
start_chat
wait_for '^> ?$'
t send-keys -t chat Up Up Up Up  # /quit, /stats, the edited line, then the first
wait_for '^> Once upon a time$'
t send-keys -t chat C-u '/quit' Enter
wait_for 'EXIT=0'
echo "ok: --history kept the lines of the previous run"
