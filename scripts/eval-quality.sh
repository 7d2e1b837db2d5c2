#!/usr/bin/env bash
# Runs the KV-cache quality matrix (kvedge perplexity --json) on the real models
# and regenerates docs/quality.md, docs/quality/*.json|csv and the plots.
# --quick: a handful of configs in under 2 minutes (CI smoke test: numbers
# finite, report renders; no quality assertions). --render-only: rebuild the
# report from docs/quality/results.json without running kvedge.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
quick=()
render=()
out="$root/docs"
for arg in "$@"; do
  case "$arg" in
    --quick) quick=(--quick); out="${KVEDGE_QUALITY_OUT:-$root/build/quality-quick}" ;;
    --render-only) render=(--render-only) ;;
    *) echo "usage: $0 [--quick] [--render-only]" >&2; exit 2 ;;
  esac
done
kvedge="${KVEDGE_BIN:-$root/build/release/kvedge}"
shared="${KVEDGE_SHARED:-$root/../shared}"
[[ -x "$kvedge" ]] || { echo "eval-quality: no kvedge binary at $kvedge (cmake --build --preset release --target kvedge)" >&2; exit 1; }
[[ -f "$shared/models/stories260K.bin" ]] || { echo "eval-quality: no models under $shared/models (set KVEDGE_SHARED)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "eval-quality: gnuplot is needed for the plots" >&2; exit 1; }
mkdir -p "$out"
exec python3 "$here/quality/eval_quality.py" --kvedge "$kvedge" --shared "$shared" --out "$out" "${quick[@]}" "${render[@]}"
