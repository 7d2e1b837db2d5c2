#!/usr/bin/env bash
# Installs what is missing, builds kvedge (release) and streams a story from
# the real stories260K model shipped in models/ under a 64 KiB INT4
# attention-sinks KV budget. Needs nothing beside the clone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --no-arm
echo "demo: building kvedge (release; a few minutes the first time)" >&2
cmake --preset release >/dev/null
cmake --build --preset release --target kvedge >/dev/null || { echo "demo.sh: build failed" >&2; exit 1; }
./build/release/kvedge info
echo
./build/release/kvedge generate -m models/stories260K.gguf \
  -p "Once upon a time" -n 400 --kv int4 --policy sinks --kv-budget 64KiB --temp 0.8 --seed 42
