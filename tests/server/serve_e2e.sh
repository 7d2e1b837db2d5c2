#!/usr/bin/env bash
# kvedge serve end to end over HTTP with curl, on stories260K:
#   every endpoint; every client error (401, 400s, 404, 413, clamped
#   max_tokens, a prompt over the session's cache, unknown fields, a slow
#   client, a client gone mid-stream or before a non-streaming reply, every live session busy → 503 and the
#   wait queue full → 429, both with Retry-After); SIGTERM saves the sessions and a restart continues them
#   (cached_tokens > 0); 50 conversations whose session budgets sum to 10x the
#   total, interleaved 10 at a time, each reply equal to the reply the
#   conversation gets alone.
# Usage: serve_e2e.sh KVEDGE MODELS_DIR
set -euo pipefail
kvedge="$1"
models="$2"
work="$(mktemp -d)"
# Kills the background jobs still running (servers, clients), never a PID
# from a list: bash reaps a job that exited, and its PID can be reused by
# any process on the machine (pid_max is 32768 on many) before the exit.
cleanup() {
  local alive
  alive=$(jobs -pr)
  [[ -z "${alive}" ]] || kill -KILL ${alive} 2>/dev/null || true
  rm -rf "${work}"
}
trap cleanup EXIT
# running PID: the job is still running (its PID cannot have been reused).
running() { jobs -pr | grep -qx "$1"; }
fail() {
  echo "serve_e2e: FAIL: $*" >&2
  exit 1
}
model=(-m "${models}/stories260K.bin" --tokenizer "${models}/tok512.bin")
KEY=test-key-123
auth=(-H "Authorization: Bearer ${KEY}")

# start NAME ARGS...: starts a server, sets PORT and PID.
start() {
  local name="$1"
  shift
  "${kvedge}" serve "${model[@]}" --port 0 -t 1 "$@" >"${work}/${name}.out" 2>"${work}/${name}.err" &
  PID=$!
  ERR="${work}/${name}.err"
  for _ in $(seq 200); do
    if PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "${work}/${name}.out" 2>/dev/null | grep -o '[0-9]*$'); then
      return 0
    fi
    running "${PID}" || { cat "${work}/${name}.err" >&2; fail "server ${name} did not start"; }
    sleep 0.1
  done
  fail "server ${name} printed no port"
}
# stop PID: SIGTERM, wait, expect exit 0.
stop() {
  running "$1" || { tail -30 "${ERR}" >&2; fail "server $1 exited before SIGTERM"; }
  kill -TERM "$1"
  local rc=0
  wait "$1" || rc=$?
  [[ ${rc} == 0 ]] || { tail -30 "${ERR}" >&2; fail "server exited with ${rc} on SIGTERM"; }
}
# json FILE PYTHON-EXPR (on d): prints the value.
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
# req METHOD PATH [BODY] → status code in $CODE, body in ${work}/body, headers in ${work}/headers
req() {
  local args=(-s -o "${work}/body" -D "${work}/headers" -w '%{http_code}' -X "$1" "${auth[@]}")
  [[ $# -ge 3 ]] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
  CODE=$(curl "${args[@]}" "http://127.0.0.1:${PORT}$2")
}
expect() {  # expect CODE PARAM-OR-EMPTY DESCRIPTION
  [[ "${CODE}" == "$1" ]] || fail "$3: HTTP ${CODE}, expected $1: $(cat "${work}/body")"
  if [[ "$1" -ge 400 ]]; then
    [[ "$(json "${work}/body" 'd["error"]["type"] != "" and d["error"]["message"] != ""')" == True ]] ||
      fail "$3: not an OpenAI error: $(cat "${work}/body")"
    if [[ -n "$2" ]]; then
      [[ "$(json "${work}/body" 'd["error"]["param"]')" == "$2" ]] || fail "$3: param is not $2: $(cat "${work}/body")"
    fi
  fi
}
wait_metric() {  # wait_metric "NAME VALUE": polls /metrics (up to 10 s) until that line is there
  for _ in $(seq 100); do
    req GET /metrics
    grep -q "^$1\$" "${work}/body" && return 0
    sleep 0.1
  done
  return 1
}
msg() { python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":sys.argv[1]}],"max_tokens":int(sys.argv[2]),"temperature":0}))' "$1" "$2"; }

echo "== endpoints"
start main --api-key "${KEY}" --session-dir "${work}/sessions" --max-body 64KiB --max-tokens 300 --timeout 2 -c 256
req GET /health; expect 200 "" health
req GET /v1/models; expect 200 "" models
[[ "$(json "${work}/body" 'd["data"][0]["id"]')" == stories260K.bin ]] || fail "models: $(cat "${work}/body")"
req GET /; expect 200 "" page
grep -qi "<html\|<!doctype" "${work}/body" || fail "GET / is not HTML"
req POST /v1/chat/completions "$(msg 'Tell me a story about a cat' 16)"; expect 200 "" chat
cp "${work}/body" "${work}/turn1.json"
for f in session cached_tokens tokens_in_cache kv_bytes kv_budget_bytes ttft_s; do
  json "${work}/turn1.json" "d['kvedge']['${f}']" >/dev/null || fail "no kvedge.${f}"
done
[[ "$(json "${work}/turn1.json" 'd["usage"]["completion_tokens"]')" == 16 ]] || fail "usage: $(cat "${work}/turn1.json")"
[[ "$(json "${work}/turn1.json" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')" == 0 ]] || fail "cached on a new chat"
reply1=$(json "${work}/turn1.json" 'json.dumps(d["choices"][0]["message"]["content"])')
turn2=$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":"Tell me a story about a cat"},{"role":"assistant","content":json.loads(sys.argv[1])},{"role":"user","content":"And then?"}],"max_tokens":8,"temperature":0}))' "${reply1}")
req POST /v1/chat/completions "${turn2}"; expect 200 "" "second turn"
cp "${work}/body" "${work}/turn2.json"
cached=$(json "${work}/body" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')
[[ "${cached}" -gt 0 ]] || fail "the second turn reused no tokens: $(cat "${work}/body")"
[[ "$(json "${work}/body" 'd["kvedge"]["session"]')" == "$(json "${work}/turn1.json" 'd["kvedge"]["session"]')" ]] ||
  fail "the second turn changed session"
# Streaming: role chunk, content chunks, a final chunk with finish_reason, usage and kvedge, [DONE].
curl -sN "${auth[@]}" "http://127.0.0.1:${PORT}/v1/chat/completions" \
  -d "$(msg 'Once upon a time' 12 | python3 -c 'import json,sys; d=json.load(sys.stdin); d["stream"]=True; print(json.dumps(d))')" \
  >"${work}/stream.txt"
[[ "$(tail -2 "${work}/stream.txt" | head -1)" == "data: [DONE]" ]] || fail "stream does not end with [DONE]"
python3 - "${work}/stream.txt" <<'PY' || fail "bad SSE stream"
import json, sys
events = [l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]"
chunks = [json.loads(e) for e in events[:-1]]
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
assert text, "no text"
last = chunks[-1]
assert last["choices"][0]["finish_reason"] == "length", last
assert last["usage"]["completion_tokens"] == 12, last
assert "session" in last["kvedge"] and "kv_bytes" in last["kvedge"], last
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
PY
req POST /v1/completions '{"prompt":"Once upon a time","max_tokens":10,"temperature":0}'; expect 200 "" completions
[[ "$(json "${work}/body" 'd["choices"][0]["text"]')" == ", there was a little girl named Lily" ]] ||
  fail "completions: greedy text differs: $(cat "${work}/body")"
req GET /v1/sessions; expect 200 "" sessions
[[ "$(json "${work}/body" 'all(k in d["data"][0] for k in ("id","tokens","kv_bytes","kv_budget_bytes","on_disk","last_used"))')" == True ]] ||
  fail "sessions: $(cat "${work}/body")"
req GET /metrics; expect 200 "" metrics
for m in kvedge_requests_total kvedge_decode_tokens_per_second kvedge_sessions_live kvedge_sessions_on_disk \
         kvedge_kv_held_bytes kvedge_kv_budget_bytes kvedge_ttft_seconds_sum; do
  grep -q "^${m} " "${work}/body" || fail "metrics lack ${m}"
done
req POST /tokenize '{"content":"Once upon a time"}'; expect 200 "" tokenize
[[ "$(json "${work}/body" 'd["tokens"]')" == "[403, 407, 261, 378]" ]] || fail "tokenize: $(cat "${work}/body")"
req POST /detokenize '{"tokens":[403,407,261,378]}'; expect 200 "" detokenize
[[ "$(json "${work}/body" 'd["content"]')" == " Once upon a time" ]] || fail "detokenize: $(cat "${work}/body")"

echo "== client errors"
CODE=$(curl -s -o "${work}/body" -w '%{http_code}' "http://127.0.0.1:${PORT}/v1/models"); expect 401 "" "no key"
CODE=$(curl -s -o "${work}/body" -w '%{http_code}' -H "Authorization: Bearer wrong" "http://127.0.0.1:${PORT}/v1/models")
expect 401 "" "wrong key"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}'; expect 400 "" "malformed JSON"
req POST /v1/chat/completions '{"messages":"hi"}'; expect 400 messages "messages of the wrong type"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}'; expect 400 max_tokens "max_tokens of the wrong type"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"temperature":-1}'; expect 400 temperature "negative temperature"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"stop":[1,2]}'; expect 400 stop "stop of the wrong type"
req POST /v1/completions '{"prompt":{"a":1}}'; expect 400 prompt "prompt of the wrong type"
req POST /detokenize '{"tokens":[99999]}'; expect 400 tokens "token out of range"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0,"frobnicate":[1,{"x":2}],"logit_bias":{}}'
expect 200 "" "unknown fields are ignored"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1000000000,"temperature":0}'
expect 200 "" "huge max_tokens"
[[ "$(json "${work}/body" 'd["kvedge"]["max_tokens"]')" == 300 ]] || fail "max_tokens not clamped to --max-tokens 300"
req GET /v1/nothing; expect 404 "" "unknown endpoint"
python3 -c 'print("{\"prompt\":\"" + "a" * 100000 + "\"}")' >"${work}/big.json"
CODE=$(curl -s -o "${work}/body" -w '%{http_code}' "${auth[@]}" --data-binary @"${work}/big.json" "http://127.0.0.1:${PORT}/v1/completions")
expect 413 "" "body over --max-body"
long=$(python3 -c 'print("once upon a time " * 120)')
req POST /v1/completions "{\"prompt\":\"${long}\",\"max_tokens\":4}"; expect 400 prompt "prompt over the session's cache"
grep -q "at most 256" "${work}/body" || fail "the error does not name the cache size: $(cat "${work}/body")"
# A slow client (headers never finished) is dropped after --timeout; others are served meanwhile.
exec 3<>"/dev/tcp/127.0.0.1/${PORT}"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\n' >&3
req GET /health; expect 200 "" "health beside a slow client"
if ! timeout 10 cat <&3 >/dev/null; then fail "a slow client was not dropped within 10 s"; fi
exec 3<&-
# A client gone mid-stream: its sequence stops, its session stays usable.
curl -sN --max-time 1 "${auth[@]}" "http://127.0.0.1:${PORT}/v1/completions" \
  -d '{"prompt":"The dog","max_tokens":300,"temperature":0.8,"stream":true}' >/dev/null || true
wait_metric "kvedge_sequences_active 0" || fail "a cancelled sequence is still decoding"
req GET /v1/sessions
[[ "$(json "${work}/body" 'any(s["busy"] for s in d["data"])')" == False ]] || fail "a session stayed busy"
req POST /v1/completions '{"prompt":"The dog","max_tokens":4,"temperature":0}'; expect 200 "" "after a cancel"

echo "== SIGTERM saves, a restart continues"
session=$(json "${work}/turn1.json" 'd["kvedge"]["session"]')
stop "${PID}"
[[ -f "${work}/sessions/${session}.kvs" ]] || fail "SIGTERM saved no session file for ${session}"
start main2 --api-key "${KEY}" --session-dir "${work}/sessions" -c 256
# A second server on the same session directory (or port) is refused: it
# would overwrite the first one's conversations.
rc=0
timeout 60 "${kvedge}" serve "${model[@]}" --port 0 -t 1 --session-dir "${work}/sessions" >/dev/null 2>"${work}/rival.err" || rc=$?
[[ ${rc} -ne 0 ]] && grep -q "is in use by another process (pid ${PID})" "${work}/rival.err" ||
  fail "a second server on the same --session-dir: exit ${rc}, $(cat "${work}/rival.err")"
rc=0
timeout 60 "${kvedge}" serve "${model[@]}" --port "${PORT}" -t 1 >/dev/null 2>"${work}/rival.err" || rc=$?
[[ ${rc} -ne 0 ]] && grep -q "cannot bind" "${work}/rival.err" ||
  fail "a second server on port ${PORT}: exit ${rc}, $(cat "${work}/rival.err")"
# The third turn continues the saved session.
turn3=$(python3 -c 'import json,sys; t=json.loads(sys.argv[1]); r=json.load(open(sys.argv[2]))["choices"][0]["message"]["content"]; t["messages"] += [{"role":"assistant","content":r},{"role":"user","content":"The end?"}]; print(json.dumps(t))' "${turn2}" "${work}/turn2.json")
req POST /v1/chat/completions "${turn3}"; expect 200 "" "after restart"
[[ "$(json "${work}/body" 'd["kvedge"]["session"]')" == "${session}" ]] || fail "the restarted server did not find ${session}"
[[ "$(json "${work}/body" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')" -gt 0 ]] ||
  fail "no cached tokens after a restart: $(cat "${work}/body")"
stop "${PID}"

echo "== every live session busy: 503 with Retry-After"
start busy --max-sessions 1 -c 256 --max-tokens 1000000
# A long stream holds the one session; the client leaves after 8 s.
curl -sN --max-time 8 "http://127.0.0.1:${PORT}/v1/completions" \
  -d '{"prompt":"A long story","max_tokens":1000000,"temperature":0.8,"stream":true}' >/dev/null &
bg=$!
auth=()
for _ in $(seq 100); do  # until the stream holds the session
  req GET /v1/sessions
  [[ "$(json "${work}/body" 'any(s["busy"] for s in d["data"])')" == True ]] && break
  sleep 0.1
done
req POST /v1/completions '{"prompt":"Another story","max_tokens":4}'
expect 503 "" "no free session"
grep -qi '^Retry-After: ' "${work}/headers" || fail "503 without Retry-After"
wait "${bg}" || true
for _ in $(seq 100); do  # the client left mid-stream: its sequence stops, the session is freed
  req GET /v1/sessions
  [[ "$(json "${work}/body" 'any(s["busy"] for s in d["data"])')" == False ]] && break
  sleep 0.1
done
[[ "$(json "${work}/body" 'any(s["busy"] for s in d["data"])')" == False ]] || fail "a client that left kept its session busy"
req POST /v1/completions '{"prompt":"Another story","max_tokens":4}'
expect 200 "" "a session freed by a client that left"
# A non-streaming client that leaves before its reply: noticed on its socket
# (nothing is written until the end), the sequence stops within a second or two.
gen() { req GET /metrics; awk '/^kvedge_generated_tokens_total /{print $2}' "${work}/body"; }
before=$(gen)
curl -s --max-time 1 -o /dev/null "http://127.0.0.1:${PORT}/v1/completions" \
  -d '{"prompt":"A long story","max_tokens":1000000,"temperature":0.8}' || true
left=$(date +%s%N)
wait_metric "kvedge_sequences_active 0" || fail "a non-streaming client that left kept its sequence decoding"
took=$(( ($(date +%s%N) - left) / 1000000 ))
[[ ${took} -lt 3000 ]] || fail "a non-streaming client that left was noticed after ${took} ms"
after=$(gen)
python3 -c "import sys; b, a = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if 0 < a - b < 1000000 else 1)" "${before}" "${after}" ||
  fail "the non-streaming request that lost its client generated $before -> $after tokens"
req GET /v1/sessions
[[ "$(json "${work}/body" 'any(s["busy"] for s in d["data"])')" == False ]] || fail "a non-streaming client that left kept its session busy"
req POST /v1/completions '{"prompt":"Another story","max_tokens":4}'
expect 200 "" "after a non-streaming client left"
stop "${PID}"

echo "== the wait queue full: 429 with Retry-After"
start queue --parallel 1 --max-queued 1 -c 256 --max-tokens 1000000
# A long stream takes the one decoding slot (its client leaves after 8 s); a second request waits.
curl -sN --max-time 8 "http://127.0.0.1:${PORT}/v1/completions" \
  -d '{"prompt":"A long story","max_tokens":1000000,"temperature":0.8,"stream":true}' >/dev/null &
bg=$!
wait_metric "kvedge_sequences_active 1" || true
curl -s --max-time 20 -o "${work}/waited" -w '%{http_code}' "http://127.0.0.1:${PORT}/v1/completions" \
  -d '{"prompt":"Waiting story","max_tokens":4}' >"${work}/waited.code" &
waiter=$!
wait_metric "kvedge_requests_queued 1" || fail "the second request is not waiting: $(grep queued "${work}/body")"
req POST /v1/completions '{"prompt":"A third story","max_tokens":4}'
expect 429 "" "queue full"
grep -qi '^Retry-After: ' "${work}/headers" || fail "429 without Retry-After"
wait "${bg}" || true
wait "${waiter}" || true
[[ "$(cat "${work}/waited.code")" == 200 ]] || fail "the waiting request got HTTP $(cat "${work}/waited.code") once the slot was free"
stop "${PID}"

echo "== 50 conversations in a budget a tenth of their sum, interleaved"
# Alone: one conversation at a time, every session kept in memory.
start alone -c 128 --parallel 1
python3 - "${PORT}" "${work}/alone.json" <<'PY'
import json, sys, urllib.request
port, out = sys.argv[1], sys.argv[2]
def ask(msgs):
    body = json.dumps({"messages": msgs, "max_tokens": 12, "temperature": 0}).encode()
    r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body))
    return json.load(r)
words = ["cat", "dog", "ball", "tree", "sun", "boat", "cake", "bird", "fish", "moon"]
replies = {}
for c in range(50):
    msgs = []
    for t in range(3):
        msgs.append({"role": "user", "content": f"Tell me about the {words[c % 10]} {c}, part {t}"})
        d = ask(msgs)
        replies[f"{c}/{t}"] = d["choices"][0]["message"]["content"]
        msgs.append({"role": "assistant", "content": replies[f"{c}/{t}"]})
json.dump(replies, open(out, "w"))
PY
req GET /metrics
per=$(awk '/^kvedge_kv_reserved_bytes /{print $2}' "${work}/body" | python3 -c 'import sys; print(round(float(sys.stdin.read())) // 50)')
stop "${PID}"
# Interleaved: a total budget of 5 sessions for 50 (their budgets sum to 10x the total).
start tight -c 128 --kv-budget-total $((per * 5)) --session-dir "${work}/tight" --parallel 8
python3 - "${PORT}" "${work}/alone.json" <<'PY'
import json, sys, threading, urllib.request, urllib.error, time
port, alone = sys.argv[1], json.load(open(sys.argv[2]))
def ask(msgs):
    body = json.dumps({"messages": msgs, "max_tokens": 12, "temperature": 0}).encode()
    for attempt in range(200):
        try:
            r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body))
            return json.load(r)
        except urllib.error.HTTPError as e:
            if e.code != 503 or not e.headers.get("Retry-After"):
                raise
            time.sleep(0.05)
    raise RuntimeError("503 for too long")
words = ["cat", "dog", "ball", "tree", "sun", "boat", "cake", "bird", "fish", "moon"]
errors, cached = [], []
msgs = {c: [] for c in range(50)}
def turn(c, t):
    msgs[c].append({"role": "user", "content": f"Tell me about the {words[c % 10]} {c}, part {t}"})
    d = ask(msgs[c])
    got = d["choices"][0]["message"]["content"]
    if got != alone[f"{c}/{t}"]:
        errors.append(f"conversation {c} turn {t}: {got!r} != {alone[f'{c}/{t}']!r}")
    if t > 0:
        cached.append(d["usage"]["prompt_tokens_details"]["cached_tokens"])
    msgs[c].append({"role": "assistant", "content": got})
def run(jobs):
    ts = [threading.Thread(target=lambda j=j: [turn(c, t) for c, t in j]) for j in jobs]
    for t in ts: t.start()
    for t in ts: t.join()
# Turns 0 and 1 back to back, 10 conversations at a time (5 live sessions:
# 503s are retried); then turn 2 of all 50, 10 at a time, the sessions of
# most already swapped to disk.
for start in range(0, 50, 10):
    run([[(c, 0), (c, 1)] for c in range(start, start + 10)])
for start in range(0, 50, 10):
    run([[(c, 2)] for c in range(start, start + 10)])
if errors:
    print("\n".join(errors[:10])); sys.exit(1)
if any(x == 0 for x in cached):
    print("a later turn reused no session:", cached); sys.exit(1)
print(f"50 conversations x 3 turns: every reply equals the reply alone; all {len(cached)} later turns continued their session")
PY
req GET /metrics
grep -E '^kvedge_(sessions_live|sessions_on_disk|session_saves_total|session_restores_total) ' "${work}/body"
[[ "$(awk '/^kvedge_session_restores_total /{print $2}' "${work}/body")" -gt 0 ]] || fail "no session was restored from disk"
[[ "$(awk '/^kvedge_sessions_live /{print $2}' "${work}/body")" -le 5 ]] || fail "more live sessions than the budget holds"
stop "${PID}"
echo "serve_e2e: ok"
