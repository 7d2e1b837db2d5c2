#!/usr/bin/env bash
# `kvedge tokenize --ids --no-bos -f CASE` prints llama.cpp's ids for every
# case of every vocabulary in the conformance kit (one process per case: the
# file's bytes exactly, vocabulary-only GGUFs), and tokenizes invalid UTF-8.
# KVEDGE_CASE_STRIDE=N runs every Nth case only: the cross and sanitizer builds' ctest sets 10, since under
# qemu or ASan each process costs about a second and kvedge_tokenizer_conformance_test checks every case
# in process there.
# usage: tokenize.sh VOCAB_DIR MODELS_DIR kvedge-command...
set -euo pipefail
vocabs=$1 models=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 total=0
stride=${KVEDGE_CASE_STRIDE:-1}
for gguf in "$vocabs"/ggml-vocab-*.gguf; do
  # Split the .inp cases (separated by "\n__ggml_vocab_test__\n") into files.
  python3 - "$gguf.inp" "$tmp/case" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
parts = data.split(b"\n__ggml_vocab_test__\n")
if parts and parts[-1] == b"":
    parts.pop()
for i, p in enumerate(parts):
    open(f"{sys.argv[2]}.{i}", "wb").write(p)
print(len(parts))
PY
  i=0
  while IFS= read -r want || [[ -n "$want" ]]; do
    if (( i % stride != 0 )); then i=$((i + 1)); continue; fi
    got=$("$@" tokenize -m "$gguf" -f "$tmp/case.$i" --ids --no-bos)
    total=$((total + 1))
    if [[ "$(echo $got)" != "$(echo $want)" ]]; then
      echo "MISMATCH $(basename "$gguf") case $i: got '$got' want '$want'" >&2
      failures=$((failures + 1))
    fi
    i=$((i + 1))
  done <"$gguf.out"
  rm -f "$tmp"/case.*
done
echo "$total cases, $failures mismatches"
[[ $((total * stride)) -ge 200 && $failures -eq 0 ]]

# Invalid UTF-8 is tokenized, not refused: 0xFF is <0xFF> (id 258) in tok512.
printf 'bad \xff text' >"$tmp/bad.txt"
ids=$("$@" tokenize -m "$models/stories260K.bin" --tokenizer "$models/tok512.bin" -f "$tmp/bad.txt" --ids)
[[ " $ids " == *" 258 "* ]] || { echo "invalid UTF-8: got '$ids'" >&2; exit 1; }
# --special parses control tokens; plain text spells them out.
plain=$("$@" tokenize -m "$vocabs/ggml-vocab-llama-bpe.gguf" -p "<|eot_id|>" --ids)
special=$("$@" tokenize -m "$vocabs/ggml-vocab-llama-bpe.gguf" -p "<|eot_id|>" --ids --special)
[[ "$special" == "128000 128009" && "$plain" != "$special" ]] || { echo "--special: '$plain' / '$special'" >&2; exit 1; }
echo ok
