#!/usr/bin/env bash
# Installs what is missing, builds kvedge (release) and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --no-arm
cmake --preset release >/dev/null
cmake --build --preset release --target kvedge 2>&1 | grep -E "error|warning: " || true
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "demo.sh: build failed" >&2; exit 1; }
./build/release/kvedge info
