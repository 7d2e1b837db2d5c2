#!/usr/bin/env bash
# Guest instructions per decoded token of the aarch64 build under qemu-aarch64, per CPU model
# (cortex-a72: NEON without dotprod; neoverse-n1: NEON with sdot; max with SVE at 256 and 512 bits:
# the SVE2 target), so that ARM regressions show without ARM hardware. ARM *timing* stays unmeasured: qemu's speed says nothing about a core's.
#
# How: qemu logs every translated block's instructions (-d in_asm) and every block it executes
# (-d exec, nochain so none is skipped); scripts/qemu_insn_count.py sums the two. `kvedge bench`
# decodes N and then 2N tokens on the same cache; the difference over N is the per-token count
# (loading, filling and the first step cancel out).
#
# Usage: scripts/arm-insn-count.sh [--build build/aarch64] [--depth 4096] [--n 2] [--kv "int4 f16"]
#        [--dims 512,2,8,1,1024,512,32768] [--weights q4_0] [--cpus "cortex-a72 neoverse-n1 ..."]
# --weights is synth's (q4_0, q8_0, f16 or a quantize preset such as Q4_K_M); --cpus the QEMU_CPU
# models (default: cortex-a72 neoverse-n1 max,sve-default-vector-length=32 max,…=64).
# Needs the aarch64 build (scripts/test.sh --only aarch64 or cmake --preset aarch64 && cmake --build
# --preset aarch64 --target kvedge) and the host build's kvedge (for `synth`).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/aarch64 depth=4096 n=2 kvs="int4 f16" dims=512,2,8,1,1024,512,32768 weights=q4_0
cpus="cortex-a72 neoverse-n1 max,sve-default-vector-length=32 max,sve-default-vector-length=64"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --depth) depth="$2"; shift 2 ;;
    --n) n="$2"; shift 2 ;;
    --kv) kvs="$2"; shift 2 ;;
    --dims) dims="$2"; shift 2 ;;
    --weights) weights="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "arm-insn-count: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
kvedge_arm="${build}/kvedge"
kvedge_host=build/release/kvedge
[[ -x "${kvedge_arm}" ]] || { echo "arm-insn-count: no ${kvedge_arm} (build the aarch64 preset)" >&2; exit 2; }
[[ -x "${kvedge_host}" ]] || { echo "arm-insn-count: no ${kvedge_host} (build the release preset)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
"${kvedge_host}" synth --dims "${dims}" --weights "${weights}" -o "${work}/m.gguf" >/dev/null

# count CPU KV N: guest instructions of `kvedge bench` decoding N tokens at the depth.
count() {
  local cpu="$1" kv="$2" tokens="$3"
  mkfifo "${work}/log"
  python3 scripts/qemu_insn_count.py <"${work}/log" >"${work}/count" &
  local counter=$!
  # Runs in $(…), where set -e does not reach: each failure returns non-zero itself, so the
  # caller's assignment fails and the script stops instead of printing a wrong count.
  qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:/usr/lib/aarch64-linux-gnu \
    -cpu "${cpu}" -d in_asm,exec,nochain -D "${work}/log" \
    "${kvedge_arm}" bench -m "${work}/m.gguf" -d "${depth}" -n "${tokens}" --fill keys --kv "${kv}" \
    --policy window -c $((depth + 2 * n + 8)) -t 1 --json >/dev/null ||
    { kill "${counter}" 2>/dev/null; echo "arm-insn-count: kvedge bench failed under qemu -cpu ${cpu} (--kv ${kv}, -n ${tokens})" >&2; return 1; }
  wait "${counter}" || { echo "arm-insn-count: counting the qemu log failed" >&2; return 1; }
  rm -f "${work}/log"
  cat "${work}/count"
}

echo "guest instructions per decoded token, synth ${weights} model (dims ${dims}), depth ${depth}, 1 thread"
echo
echo "| CPU (Highway target) | KV format | instructions/token |"
echo "|---|---|---|"
for cpu in ${cpus}; do
  case "${cpu}" in
    cortex-a72) name="cortex-a72 (NEON)" ;;
    neoverse-n1) name="neoverse-n1 (NEON + dotprod)" ;;
    *=32) name="SVE2, 256-bit" ;;
    *=64) name="SVE2, 512-bit" ;;
    *) name="${cpu}" ;;
  esac
  for kv in ${kvs}; do
    a=$(count "${cpu}" "${kv}" "${n}")
    b=$(count "${cpu}" "${kv}" $((2 * n)))
    echo "| ${name} | ${kv} | $(( (b - a) / n )) |"
  done
done
