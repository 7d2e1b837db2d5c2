#!/usr/bin/env bash
# Installs what is missing, builds and runs kvedge's whole test suite:
#   1. release build + ctest (x86-64, every Highway target this CPU supports),
#      then the quality evaluator's --quick smoke run
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build + ctest
#   3. ThreadSanitizer build + the multi-threaded tests
#   4. aarch64 cross build + ctest under qemu-aarch64: every suite on NEON (cortex-a72; not the SCALAR
#      instances, never dispatched on aarch64, run by the x86 stages); the weight- and
#      KV-kernel suites' NEON instances on neoverse-n1 (dotprod); the SIMD and KV-cache suites (the code that
#      dispatches per target) again on SVE at 128, 256 and 512 bits (SVE2_128, SVE_256, SVE2 + SVE)
#   5. fuzz smoke (libFuzzer, short) when its script exists
#   6. install: scripts/test-install.sh (install, CMake/pkg-config/Python embedders, .deb contents)
# Usage: scripts/test.sh [--only release|asan|tsan|aarch64|fuzz|install]...  (default: all)
# Builds go through ccache (CMakeLists.txt), so a clone whose sources were built before rebuilds in
# seconds; each stage builds only the targets it runs, as one make target (a list of targets builds
# one after another). The sanitizer stages run the soak-style loops at a tenth of their length
# (KVEDGE_TEST_SCALE=0.1), the aarch64 tests at a fiftieth (0.02, set by ctest); at any scale below 1
# the long kernel sweeps take their quick mode (QuickRun(), tests/testing/test_scale.h: fewer sizes,
# every shape class). The release stage runs everything in full.
# Cost (CPU seconds, cold ccache; CI wall on 2 cores is about half): aarch64 qemu runs ~1,100 since
# the kernel suites' quick mode (the KV-kernel suite's five runs ~1,180 -> 134, measured), asan build
# ~1,340, fuzz (clang ASan) build ~1,120, release build ~840, aarch64 build ~810, tsan build ~460
# (README, the CI paragraph).
# Prints a summary of what ran; exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

stages=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) stages+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ ${#stages[@]} -eq 0 ]] && stages=(release asan tsan aarch64 fuzz install)

want() { local s; for s in "${stages[@]}"; do [[ "$s" == "$1" ]] && return 0; done; return 1; }

need_arm=--no-arm
want aarch64 && need_arm=""
scripts/install-deps.sh $need_arm

summary=()
start_all=$(date +%s)
# Minutes since a `date +%s` stamp, one decimal.
minutes_since() { awk -v s="$(( $(date +%s) - $1 ))" 'BEGIN { printf "%.1f", s / 60 }'; }

# Runs ctest and records "name: N passed, M failed" from its closing lines.
run_ctest() {
  local label="$1"; shift
  local log
  log=$(mktemp)
  local t0=$(date +%s)
  set +e
  "$@" >"$log" 2>&1
  local rc=$?
  set -e
  grep -E "tests passed|The following tests|^\s+[0-9]+ - " "$log" || true
  if [[ $rc -ne 0 ]]; then
    tail -n 200 "$log" >&2
    # Then each failed test's own output (ctest prints it after the test's
    # result line), last, where a reader of the log's end finds it.
    awk '/^ *Start +[0-9]+:|Test +#[0-9]+: .*(Passed|Skipped)/ { keep = 0 }
         /Test +#[0-9]+: .*(\*\*\*|Failed|Timeout|Exception)/ { keep = 1; print "== output of a failed test:" }
         keep' "$log" | tail -n 150 >&2
  fi
  local total passed skipped
  total=$(grep -oE "tests failed out of [0-9]+" "$log" | grep -oE "[0-9]+$" || echo 0)
  passed=$(grep -cE "Test +#[0-9]+: .* Passed" "$log" || true)
  skipped=$(grep -cE "Test +#[0-9]+: .*Skipped" "$log" || true)
  summary+=("$label: ${passed} of ${total} tests passed, ${skipped} skipped ($(minutes_since "$t0") min)")
  rm -f "$log"
  if [[ $rc -ne 0 ]]; then
    echo "test.sh: FAILED in stage '$label'" >&2
    printf '%s\n' "${summary[@]}" >&2
    exit "$rc"
  fi
}

# build PRESET [TARGET...]: configure and build (all targets, or only those given).
build() {
  local preset="$1"; shift
  local t0=$(date +%s)
  echo "== configure + build: $preset"
  cmake --preset "$preset" >/dev/null
  local targets=()
  [[ $# -gt 0 ]] && targets=(--target "$@")
  local log
  log=$(mktemp)
  if ! cmake --build --preset "$preset" "${targets[@]}" >"$log" 2>&1; then
    grep -E "error|Error" "$log" | head -40 >&2 || tail -40 "$log" >&2
    echo "test.sh: build of '$preset' failed" >&2
    exit 1
  fi
  grep -E "warning: " "$log" || true
  rm -f "$log"
  summary+=("build $preset ($(minutes_since "$t0") min)")
}

if want release; then
  build release
  run_ctest "x86-64 release" ctest --preset release
  # Quality smoke: a few real-model configs, numbers finite, report renders.
  t0=$(date +%s)
  scripts/eval-quality.sh --quick >/dev/null
  summary+=("quality smoke ($(minutes_since "$t0") min)")
fi
if want asan; then
  build asan
  run_ctest "x86-64 asan+ubsan" env KVEDGE_TEST_SCALE=0.1 ctest --preset asan
fi
if want tsan; then
  # Only the suites labelled `threads` run under TSan, and the server (its worker, HTTP threads and
  # clients: in process, then curl and the short load test against the TSan build's kvedge serve):
  # target kvedge_tsan_tests builds exactly these (tests/CMakeLists.txt), on both cores.
  build tsan kvedge_tsan_tests
  run_ctest "x86-64 tsan (threaded tests)" env KVEDGE_TEST_SCALE=0.1 ctest --preset tsan -L threads
  run_ctest "x86-64 tsan (server)" env KVEDGE_TEST_SCALE=0.1 ctest --preset tsan \
    -R '^(kvedge_server_test|server[.](e2e|load_short))'
fi
if want aarch64; then
  build aarch64
  # Not the per-target SCALAR instances: on aarch64 dispatch always has NEON (the portable code they run
  # is the x86 stages' SCALAR, tested there), and under qemu they cost as much as the NEON ones.
  run_ctest "aarch64 qemu -cpu cortex-a72 (all suites)" env QEMU_CPU=cortex-a72 GTEST_FILTER='-*/SCALAR' \
    ctest --preset aarch64
  # cortex-a72 has no Armv8.2 dotprod: its NEON instances ran the fallback. Neoverse N1 has sdot, which
  # the NEON weight kernels and the int8/int4 attention scores take (simd/arm_dotprod.h,
  # simd/kv_kernels_arm-inl.h): those suites' NEON instances again there.
  run_ctest "aarch64 qemu -cpu neoverse-n1 (weight- and KV-kernel suites, NEON with dotprod)" env QEMU_CPU=neoverse-n1 \
    GTEST_FILTER='*/NEON' ctest --preset aarch64 -R '^kvedge_simd_(legacy|kquant|model|batch|kv)_test$'
  # The SIMD kernels and the KV cache dispatch per target: their suites run again on each SVE target at
  # the vector length that dispatches it: SVE2_128 at 128 bits (Neoverse N2/V2), SVE_256 at 256 (V1),
  # the length-agnostic SVE2 and SVE at 512 (A64FX). Each run skips the per-target instances dispatch
  # would not take at its length (the generic SVE2/SVE below 512 bits; NEON ran on cortex-a72 above);
  # the suites' other tests dispatch to the best target of each length.
  for run in "16 -*/NEON:*/SCALAR:*/SVE2:*/SVE" "32 -*/NEON:*/SCALAR:*/SVE2:*/SVE" "64 -*/NEON:*/SCALAR"; do
    cpu="max,sve-default-vector-length=${run%% *}"
    run_ctest "aarch64 qemu -cpu $cpu (SIMD + KV-cache suites)" env QEMU_CPU="$cpu" GTEST_FILTER="${run#* }" \
      ctest --preset aarch64 -R '^kvedge_(simd_[a-z0-9_]+|kvcache)_test$'
  done
fi
if want fuzz && [[ -x scripts/fuzz-smoke.sh ]]; then
  t0=$(date +%s)
  scripts/fuzz-smoke.sh 20
  summary+=("fuzz smoke ($(minutes_since "$t0") min)")
fi
if want install; then
  t0=$(date +%s)
  scripts/test-install.sh
  summary+=("install: embedders (CMake, pkg-config, Python) and .deb contents ($(minutes_since "$t0") min)")
fi

echo
echo "== summary ($(minutes_since "$start_all") min in all)"
printf '%s\n' "${summary[@]}"
