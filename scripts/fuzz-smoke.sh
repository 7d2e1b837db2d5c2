#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset: clang, ASan+UBSan) and runs each
# for N seconds (default 20; one target per core at a time), seeded from the
# shared models and text. Seeds are copied to a temporary corpus at run time,
# never into the repo. Exits non-zero if any target finds a crash; crash
# inputs are kept in fuzz-corpus-crashes/ (ignored by git).
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
# The fuzz targets and kvedge (tests/fuzz/CMakeLists.txt), built as one target on every core.
cmake --build --preset fuzz --target kvedge_fuzz_targets
# The fuzz build's own kvedge starts (it writes a seed below).
ctest --test-dir build/fuzz -R '^fuzz_build\.' --output-on-failure

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
crashes="${root}/fuzz-corpus-crashes"
mkdir -p "${crashes}"

# shellcheck source=fuzz-seeds.sh
source "${root}/scripts/fuzz-seeds.sh"
for target in "${KVEDGE_FUZZ_TARGETS[@]}"; do
  kvedge_fuzz_seed "${shared}" "${target}" "${work}/${target}"
done
# One libFuzzer process per core at a time (each is single-threaded): every
# target still gets its N seconds.
jobs_max="${KVEDGE_FUZZ_JOBS:-$(nproc)}"
run_target() {
  local target="$1" rc=0
  "${root}/build/fuzz/tests/fuzz/${target}" "${work}/${target}" -max_total_time="${seconds}" \
    -max_len="${KVEDGE_FUZZ_MAX_LEN[${target}]}" "${KVEDGE_FUZZ_FLAGS[@]}" \
    -artifact_prefix="${crashes}/${target}-" 2>"${work}/${target}.log" || rc=$?
  echo "${rc}" >"${work}/${target}.rc"
}
for target in "${KVEDGE_FUZZ_TARGETS[@]}"; do
  while (( $(jobs -rp | wc -l) >= jobs_max )); do wait -n || true; done
  echo "== ${target}: ${seconds}s"
  run_target "${target}" &
done
wait
status=0
for target in "${KVEDGE_FUZZ_TARGETS[@]}"; do
  if [[ "$(cat "${work}/${target}.rc")" != 0 ]]; then
    echo "fuzz-smoke: ${target} FAILED; see the log below and ${crashes}" >&2
    tail -60 "${work}/${target}.log" >&2
    status=1
  else
    echo "== ${target}"
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "${work}/${target}.log" || true
  fi
done
exit "${status}"
