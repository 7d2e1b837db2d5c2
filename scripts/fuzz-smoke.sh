#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset: clang, ASan+UBSan) and runs each
# for N seconds (default 20), seeded from the shared models and text. Seeds
# are copied to a temporary corpus at run time, never into the repo. Exits
# non-zero if any target finds a crash; crash inputs are kept in
# fuzz-corpus-crashes/ (ignored by git).
set -euo pipefail

seconds="${1:-20}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${KVEDGE_SHARED:-${root}/../shared}"
if [[ ! -d "${shared}/models" ]]; then
  echo "fuzz-smoke: no models in '${shared}' (set KVEDGE_SHARED)" >&2
  exit 2
fi
export KVEDGE_SHARED="${shared}"

cd "${root}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_gguf fuzz_llama2c fuzz_tokenizer fuzz_cli_parse

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
crashes="${root}/fuzz-corpus-crashes"
mkdir -p "${crashes}"

seed() {  # seed <target> <files...>
  local dir="${work}/$1"
  shift
  mkdir -p "${dir}"
  cp "$@" "${dir}/"
}
seed fuzz_gguf "${shared}/models/stories260K_llamacpp.gguf"
seed fuzz_llama2c "${shared}/models/stories260K.bin" "${shared}/models/aidreams260K.bin"
seed fuzz_tokenizer "${shared}/models/tok512.bin" "${shared}/models/aidreams260K_tok512.bin"
for f in "${shared}"/data/*.txt; do
  head -c 4096 "${f}" >"${work}/fuzz_tokenizer/$(basename "${f}").head"
done
mkdir -p "${work}/fuzz_cli_parse"
printf '64MiB\0int4\0sinks\0int8\0int4\0in-cache\0\0\0\0\0\0\0' >"${work}/fuzz_cli_parse/budget"
printf '\0f16\0h2o\0\0\0absolute\0x\0ab\0cd\0ef\0g\0h' >"${work}/fuzz_cli_parse/capacity"
# Small GGUF seeds mutate faster than the 1 MiB model: its header and metadata.
head -c 12000 "${shared}/models/stories260K_llamacpp.gguf" >"${work}/fuzz_gguf/head.gguf"

# Input caps: llama2.c seeds must stay whole to load (and reach the view
# checks); GGUF parsing is exercised by its first 64 KiB; tokenizer inputs
# are re-encoded whole, so short ones keep the exec rate up.
declare -A max_len=([fuzz_gguf]=65536 [fuzz_llama2c]=1100000 [fuzz_tokenizer]=16384 [fuzz_cli_parse]=256)
status=0
for target in fuzz_gguf fuzz_llama2c fuzz_tokenizer fuzz_cli_parse; do
  echo "== ${target}: ${seconds}s"
  if ! "${root}/build/fuzz/tests/fuzz/${target}" "${work}/${target}" -max_total_time="${seconds}" \
      -max_len="${max_len[${target}]}" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
      -artifact_prefix="${crashes}/${target}-" 2>"${work}/${target}.log"; then
    echo "fuzz-smoke: ${target} FAILED; see the log below and ${crashes}" >&2
    tail -60 "${work}/${target}.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "${work}/${target}.log" || true
  fi
done
exit "${status}"
