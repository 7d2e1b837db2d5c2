#!/usr/bin/env bash
# Installs what is missing, builds kvedge (release) and streams a story from
# the real stories260K model under a 64 KiB INT4 attention-sinks KV budget.
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${KVEDGE_SHARED:-../shared}"
scripts/install-deps.sh --no-arm
echo "demo: building kvedge (release; a few minutes the first time)" >&2
cmake --preset release >/dev/null
cmake --build --preset release --target kvedge >/dev/null || { echo "demo.sh: build failed" >&2; exit 1; }
./build/release/kvedge info
echo
./build/release/kvedge generate -m "$shared/models/stories260K.bin" --tokenizer "$shared/models/tok512.bin" \
  -p "Once upon a time" -n 400 --kv int4 --policy sinks --kv-budget 64KiB --temp 0.8 --seed 42
