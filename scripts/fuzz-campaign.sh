#!/usr/bin/env bash
# Long libFuzzer campaign (issue 8): runs a fuzz target (fuzz preset: clang,
# ASan+UBSan) until it has used a CPU budget, seeded like fuzz-smoke.sh, into
# a persistent corpus outside the repo. The machine may be shared, so the
# budget is CPU time, not wall time: each run is timed with /usr/bin/time and
# runs resume on the same corpus until their CPU time adds up to the budget.
# Everything runs under `nice -n 19`. For the same reason libFuzzer's timeouts,
# which are wall time, fire on inputs that merely waited for a CPU: every
# timeout or slow-unit input is run again alone and counts as a finding only
# if it needs more than KVEDGE_FUZZ_SLOW_CPU (20) CPU-seconds; the others move
# to crashes/starved/ and the campaign resumes.
#
#   scripts/fuzz-campaign.sh TARGET [CPU_SECONDS]   one target (default 1800 s)
#   scripts/fuzz-campaign.sh all [CPU_SECONDS]      all four, KVEDGE_FUZZ_JOBS (2) at a time
#
# Environment: KVEDGE_SHARED (models and text, default ../shared),
# KVEDGE_FUZZ_DIR (campaign state, default ../fuzz-corpus), KVEDGE_FUZZ_TIMEOUT
# (libFuzzer -timeout and -report_slow_units, wall seconds, default 300).
# Per target it keeps
#   <dir>/<target>/seeds/     the seeds (written once)
#   <dir>/<target>/corpus/    inputs libFuzzer found (grows across runs)
#   <dir>/<target>/crashes/   crash-*, leak-*, timeout-*, oom-*, slow-unit-* inputs
#   <dir>/<target>/crashes/starved/  timeouts and slow units that ran fast alone
#   <dir>/<target>/logs/      one libFuzzer log per run
#   <dir>/<target>/runs.tsv   one row per run: CPU time, executions, cov, ft, exit code
#   <dir>/<target>/summary.tsv  the totals printed at the end (read by fuzz-report.sh)
# Re-running resumes; a target whose runs already add up to the budget only
# prints its summary. A run that crashes stops that target (exit 1): fix the
# bug, keep the input as a regression test, and re-run to resume.
set -euo pipefail

usage() {
  echo "usage: $0 TARGET|all [CPU_SECONDS]   (targets: fuzz_gguf fuzz_llama2c fuzz_tokenizer fuzz_cli_parse fuzz_jinja fuzz_server_request)" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
target="$1"
budget="${2:-1800}"
[[ "${budget}" =~ ^[0-9]+$ ]] || usage

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${KVEDGE_SHARED:-${root}/../shared}"
if [[ ! -d "${shared}/models" ]]; then
  echo "fuzz-campaign: no models in '${shared}' (set KVEDGE_SHARED)" >&2
  exit 2
fi
shared="$(cd "${shared}" && pwd)"
export KVEDGE_SHARED="${shared}"  # fuzz_tokenizer loads tok512.bin from it
dir="${KVEDGE_FUZZ_DIR:-${root}/../fuzz-corpus}"
mkdir -p "${dir}"
dir="$(cd "${dir}" && pwd)"
export KVEDGE_FUZZ_DIR="${dir}"
# shellcheck source=fuzz-seeds.sh
source "${root}/scripts/fuzz-seeds.sh"

if [[ -z "${KVEDGE_FUZZ_NO_BUILD:-}" ]]; then
  (cd "${root}" && nice -n 19 cmake --preset fuzz >/dev/null &&
     nice -n 19 cmake --build --preset fuzz --target "${KVEDGE_FUZZ_TARGETS[@]}" kvedge >/dev/null)
fi

if [[ "${target}" == all ]]; then
  status=0
  printf '%s\n' "${KVEDGE_FUZZ_TARGETS[@]}" |
    KVEDGE_FUZZ_NO_BUILD=1 xargs -P "${KVEDGE_FUZZ_JOBS:-2}" -I{} "$0" {} "${budget}" || status=1
  echo "== campaign summary (${dir})"
  for t in "${KVEDGE_FUZZ_TARGETS[@]}"; do
    [[ -f "${dir}/${t}/summary.tsv" ]] && tail -1 "${dir}/${t}/summary.tsv" | cut -f13
  done
  exit "${status}"
fi
[[ -n "${KVEDGE_FUZZ_MAX_LEN[${target}]:-}" ]] || usage

bin="${root}/build/fuzz/tests/fuzz/${target}"
t="${dir}/${target}"
mkdir -p "${t}/corpus" "${t}/crashes/starved" "${t}/logs"
[[ -d "${t}/seeds" ]] || kvedge_fuzz_seed "${shared}" "${target}" "${t}/seeds"
runs="${t}/runs.tsv"
[[ -f "${runs}" ]] ||
  printf 'run\tstarted\twall_s\tuser_s\tsys_s\tcpu_s\texecs\tcov\tft\texit\n' >"${runs}"

cpu_used() { awk -F'\t' 'NR > 1 { s += $6 } END { printf "%.0f", s }' "${runs}"; }

# Runs each timeout-* and slow-unit-* input in crashes/ alone (no libFuzzer
# timeout; ulimit stops a real hang) and moves those that need less than
# KVEDGE_FUZZ_SLOW_CPU CPU-seconds to crashes/starved/. Returns 1 if any is real.
check_slow() {
  local f cpu real=0 limit="${KVEDGE_FUZZ_SLOW_CPU:-20}"
  for f in "${t}"/crashes/timeout-* "${t}"/crashes/slow-unit-*; do
    [[ -f "${f}" ]] || continue
    (ulimit -t $(( limit * 3 )); /usr/bin/time -f '%U %S' -o "${f}.cpu" nice -n 19 "${bin}" -timeout=0 \
       -rss_limit_mb=2048 "${f}" >"${f}.log" 2>&1) || true
    cpu=$(tail -1 "${f}.cpu" | awk '{ print $1 + $2 }')
    if grep -q '^Executed ' "${f}.log" && awk -v c="${cpu}" -v l="${limit}" 'BEGIN { exit !(c < l) }'; then
      echo "fuzz-campaign: ${target}: $(basename "${f}") runs alone in ${cpu} CPU-s: it was starved, not slow"
      mv "${f}" "${f}.cpu" "${f}.log" "${t}/crashes/starved/"
    else
      echo "fuzz-campaign: ${target}: $(basename "${f}") needs ${cpu} CPU-s or more alone: a real finding" >&2
      real=1
    fi
  done
  return "${real}"
}

status=0
check_slow || status=1
while (( status == 0 && $(cpu_used) < budget )); do
  run=$(( $(wc -l <"${runs}") ))  # header + one line per earlier run
  left=$(( budget - $(cpu_used) ))
  # -max_total_time is wall time, which is at least the CPU time: a run never
  # overshoots the budget by more than the 60 s floor that avoids tiny runs.
  wall=$(( left > 60 ? left : 60 ))
  timeout="${KVEDGE_FUZZ_TIMEOUT:-300}"
  log="${t}/logs/run-${run}.log"
  started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "== ${target} run ${run}: ${left} CPU-s left of ${budget}, log ${log}"
  rc=0
  /usr/bin/time -f '%e %U %S' -o "${t}/logs/run-${run}.time" \
    nice -n 19 "${bin}" "${t}/corpus" "${t}/seeds" -max_total_time="${wall}" \
      -max_len="${KVEDGE_FUZZ_MAX_LEN[${target}]}" "${KVEDGE_FUZZ_FLAGS[@]}" -timeout="${timeout}" \
      -report_slow_units="${timeout}" -artifact_prefix="${t}/crashes/" >"${log}" 2>&1 || rc=$?
  # /usr/bin/time writes "Command exited with non-zero status N" first on failure.
  read -r wall_s user_s sys_s < <(tail -1 "${t}/logs/run-${run}.time")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -1)
  # A crash may end the run before the final stats: take the last "#N" status line.
  [[ -n "${execs}" ]] || execs=$(sed -n 's/^#\([0-9]\+\).*/\1/p' "${log}" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]\+\) ft: \([0-9]\+\).*/\1 \2/p' "${log}" | tail -1)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${run}" "${started}" "${wall_s}" "${user_s}" \
    "${sys_s}" "$(awk -v u="${user_s}" -v s="${sys_s}" 'BEGIN { printf "%.2f", u + s }')" \
    "${execs:-0}" "${cov% *}" "${cov#* }" "${rc}" >>"${runs}"
  check_slow || status=1
  if (( rc != 0 )) && ! grep -q '^==[0-9]*== ERROR: libFuzzer: timeout' "${log}"; then
    status=1
  fi
  if (( status != 0 )); then
    echo "fuzz-campaign: ${target} run ${run} exited ${rc}; inputs in ${t}/crashes; log tail:" >&2
    tail -40 "${log}" >&2
  fi
done

# Totals over all runs; cov/ft are those of the last status line of the last run that printed one.
n_files=$(find "${t}/corpus" -type f | wc -l)
n_bytes=$(find "${t}/corpus" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
n_seeds=$(find "${t}/seeds" -type f | wc -l)
n_crash=$(find "${t}/crashes" -maxdepth 1 -type f ! -name 'slow-unit-*' ! -name '*.cpu' ! -name '*.log' | wc -l)
n_slow=$(find "${t}/crashes" -maxdepth 1 -type f -name 'slow-unit-*' ! -name '*.cpu' ! -name '*.log' | wc -l)
n_starved=$(find "${t}/crashes/starved" -type f ! -name '*.cpu' ! -name '*.log' | wc -l)
read -r n_runs cpu execs cov ft < <(awk -F'\t' 'BEGIN { cov = ft = "-" }
  NR > 1 { n++; c += $6; e += $7; if ($8 != "") { cov = $8; ft = $9 } }
  END { printf "%d %.0f %d %s %s\n", n, c, e, cov, ft }' "${runs}")
line="${target}: ${cpu} CPU-s in ${n_runs} run(s), ${execs} execs"
line+=" ($(( cpu > 0 ? execs / cpu : 0 ))/CPU-s), cov ${cov} ft ${ft},"
line+=" corpus ${n_files} files ${n_bytes} B (+${n_seeds} seeds), crashes ${n_crash}, slow units ${n_slow}"
line+=" (starved, fast alone: ${n_starved})"
{
  printf 'target\tcpu_s\truns\texecs\tcov\tft\tcorpus_files\tcorpus_bytes\tseeds\tcrashes\tslow_units\tstarved\tsummary\tdate\n'
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${target}" "${cpu}" "${n_runs}" \
    "${execs}" "${cov}" "${ft}" "${n_files}" "${n_bytes}" "${n_seeds}" "${n_crash}" "${n_slow}" \
    "${n_starved}" "${line}" "$(date -u +%Y-%m-%d)"
} >"${t}/summary.tsv"
echo "${line}"
exit "${status}"
