#!/usr/bin/env bash
# Source coverage of a fuzz campaign (scripts/fuzz-campaign.sh) and the
# "Fuzzing" section of docs/robustness.md. Builds the fuzz targets once more
# with clang source coverage and no sanitizers (preset fuzz-coverage), runs
# each over its campaign corpus and seeds once (-runs=0, same -max_len as the
# campaign), and reports line/function/region coverage of the parser sources
# with llvm-cov. Writes docs/robustness-fuzz.md, which
# scripts/robustness-report.sh appends to docs/robustness.md.
#
#   scripts/fuzz-report.sh
#
# Environment: KVEDGE_FUZZ_DIR (campaign state, default ../fuzz-corpus),
# KVEDGE_SHARED (default ../shared), LLVM_BIN (default /usr/lib/llvm-14/bin).
# Profiles and llvm-cov reports go to <KVEDGE_FUZZ_DIR>/coverage/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "${KVEDGE_SHARED:-${root}/../shared}" && pwd)"
export KVEDGE_SHARED="${shared}"
dir="$(cd "${KVEDGE_FUZZ_DIR:-${root}/../fuzz-corpus}" && pwd)"
llvm="${LLVM_BIN:-/usr/lib/llvm-14/bin}"
# shellcheck source=fuzz-seeds.sh
source "${root}/scripts/fuzz-seeds.sh"

# The parser sources each target is there to exercise (what the table reports).
declare -A sources=(
  [fuzz_gguf]="runtime/model/gguf.cc runtime/model/model_loader.cc runtime/tokenizer/tokenizer.cc"
  [fuzz_llama2c]="runtime/model/llama2c.cc"
  [fuzz_tokenizer]="runtime/tokenizer/tokenizer.cc runtime/tokenizer/spm_tokenizer.cc runtime/tokenizer/vocab_tokenizer.cc runtime/tokenizer/pre_tokenizer.cc runtime/tokenizer/utf8.cc"
  [fuzz_cli_parse]="runtime/cli/common.cc platform/memory.cc simd/kv_format.cc kvcache/kv_cache_plan.cc"
  [fuzz_jinja]="runtime/chat/jinja_parser.cc runtime/chat/jinja_render.cc runtime/chat/jinja_value.cc"
)
# The functions each target drives (demangled-name prefixes) for the per-function table.
declare -A entries=(
  [fuzz_gguf]="kvedge::GgufFile::Parse kvedge::LoadGgufModel kvedge::LoadGgufTokenizer kvedge::LoadModelFromMemory"
  [fuzz_llama2c]="kvedge::ReadLlama2c"
  [fuzz_tokenizer]="kvedge::ParseLlama2cTokenizer kvedge::SpmTokenizer::Create kvedge::SpmTokenizer::Encode kvedge::VocabTokenizer::Encode kvedge::VocabTokenizer::EncodeSpm kvedge::VocabTokenizer::EncodeBpeWord kvedge::PreTokenizer::Split kvedge::Tokenizer::Decode kvedge::Tokenizer::DecodePiece kvedge::FindInvalidUtf8 kvedge::DecodeUtf8"
  [fuzz_cli_parse]="kvedge::ParseByteSize kvedge::ParseKvFormat kvedge::ParseEvictionPolicy kvedge::cli::MakeSessionOptions kvedge::PlanKvCache"
  [fuzz_jinja]="kvedge::jinja::ParseTemplate kvedge::jinja::Template::Render"
)
declare -A drives=(
  [fuzz_gguf]="\`GgufFile::Parse\`, \`LoadGgufModel\`, \`LoadGgufTokenizer\` + encode/decode, \`LoadModelFromMemory\`"
  [fuzz_llama2c]="\`ReadLlama2c\` (header, weight views; touches both ends of the views)"
  [fuzz_tokenizer]="\`ParseLlama2cTokenizer\` on the input + encode/decode with it; round trip of the input (invalid UTF-8 as U+FFFD in byte-level BPE) through tok512, a byte-level vocabulary under every pre-tokenizer family (with and without special parsing) and the kit's llama-spm, gpt-2 and llama-bpe vocabularies"
  [fuzz_cli_parse]="\`ParseByteSize\`, \`ParseKvFormat\`, \`ParseEvictionPolicy\`, \`MakeSessionOptions\`, \`PlanKvCache\` (arena ≤ budget)"
  [fuzz_jinja]="\`Template::Parse\` + \`Template::Render\` (twice: deterministic, output ≤ limit) with a fixed conversation"
)
declare -A seed_text=(
  [fuzz_gguf]="stories260K_llamacpp.gguf (read as its first 64 KiB), its first 12000 B, its header and metadata with 0 tensors, a 24 KiB \`kvedge synth\` model"
  [fuzz_llama2c]="stories260K.bin, aidreams260K.bin"
  [fuzz_tokenizer]="tok512.bin, aidreams260K_tok512.bin, first 4 KiB of each text in data/"
  [fuzz_cli_parse]="two hand-written flag sets"
  [fuzz_jinja]="the 31 real chat templates of conformance/chat"
)

for t in "${KVEDGE_FUZZ_TARGETS[@]}"; do
  if [[ ! -f "${dir}/${t}/summary.tsv" ]]; then
    echo "fuzz-report: no campaign for ${t} in ${dir}; run scripts/fuzz-campaign.sh first" >&2
    exit 2
  fi
done

cd "${root}"
nice -n 19 cmake --preset fuzz-coverage >/dev/null
nice -n 19 cmake --build --preset fuzz-coverage --target "${KVEDGE_FUZZ_TARGETS[@]}" >/dev/null
cov="${dir}/coverage"
rm -rf "${cov}"
mkdir -p "${cov}"
objects=()
for t in "${KVEDGE_FUZZ_TARGETS[@]}"; do
  bin="build/fuzz-coverage/tests/fuzz/${t}"
  echo "== ${t}: $(find "${dir}/${t}/corpus" "${dir}/${t}/seeds" -type f | wc -l) inputs"
  LLVM_PROFILE_FILE="${cov}/${t}.profraw" nice -n 19 "${bin}" -runs=0 \
    -max_len="${KVEDGE_FUZZ_MAX_LEN[${t}]}" "${KVEDGE_FUZZ_FLAGS[@]}" \
    "${dir}/${t}/corpus" "${dir}/${t}/seeds" >"${cov}/${t}.log" 2>&1
  "${llvm}/llvm-profdata" merge -sparse "${cov}/${t}.profraw" -o "${cov}/${t}.profdata"
  read -ra files <<<"${sources[${t}]}"
  "${llvm}/llvm-cov" report "${bin}" -instr-profile="${cov}/${t}.profdata" "${files[@]}" \
    | tee "${cov}/${t}.txt"
  "${llvm}/llvm-cov" export "${bin}" -instr-profile="${cov}/${t}.profdata" -summary-only \
    "${files[@]}" >"${cov}/${t}.json"
  "${llvm}/llvm-cov" report -show-functions "${bin}" -instr-profile="${cov}/${t}.profdata" "${files[@]}" \
    | "${llvm}/llvm-cxxfilt" >"${cov}/${t}.functions.txt"
  echo "${entries[${t}]}" >"${cov}/${t}.entries"
  objects+=(-object "${bin}")
done
# All four corpora together: what the campaign reached in each parser file.
"${llvm}/llvm-profdata" merge -sparse "${cov}"/*.profdata -o "${cov}/all.profdata"
read -ra all_files <<<"$(printf '%s\n' "${sources[@]}" | tr ' ' '\n' | sort -u | tr '\n' ' ')"
"${llvm}/llvm-cov" export "${objects[@]:1}" -instr-profile="${cov}/all.profdata" -summary-only \
  "${all_files[@]}" >"${cov}/all.json"

out=docs/robustness-fuzz.md
{
  echo "<!-- Generated by scripts/fuzz-report.sh; scripts/robustness-report.sh appends it to docs/robustness.md. -->"
  echo "## Fuzzing"
  echo
  first=$(cat "${dir}"/*/runs.tsv | awk -F'\t' '$1 != "run" { print substr($2, 1, 10) }' | sort | head -1)
  last=$(cat "${dir}"/*/summary.tsv | awk -F'\t' '$1 != "target" { print $14 }' | sort | tail -1)
  echo "libFuzzer with ASan+UBSan (preset \`fuzz\`), ${first}$([[ "${first}" == "${last}" ]] || echo " to ${last}"),"
  echo "on a 2-core machine shared with other work, every run under \`nice -n 19\`. Budgets are"
  echo "CPU time (user+sys of the fuzzer, \`/usr/bin/time\`), not wall time: a target that got less"
  echo "CPU than its budget was resumed on the same corpus until it had it. Seeds are the real files"
  echo "in \`../shared/models\` and \`../shared/data\` (\`scripts/fuzz-seeds.sh\`). Reproduce with:"
  echo
  echo '```sh'
  echo "scripts/fuzz-campaign.sh all 1800   # each target to 1800 CPU-s, two at a time; corpora in ../fuzz-corpus"
  echo "scripts/fuzz-report.sh              # source coverage over those corpora; rewrites this section"
  echo '```'
  echo
  echo "| target | drives | seeds | CPU-min | runs | executions | execs/CPU-s | cov / ft | corpus | crashes |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for t in "${KVEDGE_FUZZ_TARGETS[@]}"; do
    IFS=$'\t' read -r _ cpu runs execs c ft files bytes seeds crashes slow starved _ _ \
      < <(tail -1 "${dir}/${t}/summary.tsv")
    crash_cell="${crashes}"
    [[ "${slow}" == 0 ]] || crash_cell+=" + ${slow} slow units"
    [[ "${starved}" == 0 ]] || crash_cell+=" (+${starved} starved)"
    printf '| `%s` | %s | %s | %s | %s | %s | %s | %s / %s | %s files, %s KiB (+%s seeds) | %s |\n' \
      "${t}" "${drives[${t}]}" "${seed_text[${t}]}" "$(awk -v c="${cpu}" 'BEGIN { printf "%.1f", c / 60 }')" \
      "${runs}" "$(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"${execs}")" "$(( cpu > 0 ? execs / cpu : 0 ))" "${c}" "${ft}" "${files}" \
      "$(( (bytes + 1023) / 1024 ))" "${seeds}" "${crash_cell}"
  done
  echo
  echo "*cov / ft*: libFuzzer's edge-coverage and feature counts on its last status line (counted over"
  echo "everything the binary instruments, including the libraries). *runs*: fuzzer processes the"
  echo "budget took (resumes). *execs/CPU-s*: executions per CPU-second (per wall second would"
  echo "measure the other users of the machine). *crashes*: ASan/UBSan reports, traps, leaks, out-of-memory (2 GiB)"
  echo "inputs, and timeouts or slow units that still need ≥ 20 CPU-s when run alone; libFuzzer's"
  echo "timeouts are wall time, so on the shared machine most are a fuzzer waiting for a CPU —"
  echo "those are counted as *starved* (\`crashes/starved/\`, with the CPU time each took alone)."
  echo "(During this campaign the fuzzers were also seen stopped, state T, while another user's"
  echo "benchmark ran: wall time passed, CPU time did not.)"
  echo
  total_crashes=$(cat "${dir}"/*/summary.tsv | awk -F'\t' '$1 != "target" { c += $10 + $11 } END { print c + 0 }')
  total_min=$(cat "${dir}"/*/summary.tsv | awk -F'\t' '$1 != "target" { c += $2 } END { printf "%.0f", c / 60 }')
  if [[ "${total_crashes}" == 0 ]]; then
    echo "No target found a crash, sanitizer report, leak, out-of-memory or real timeout in"
    echo "${total_min} CPU-minutes in all, so the campaign led to no library fix and no regression input."
  else
    echo "**${total_crashes} inputs in \`crashes/\` still need a look** (fix, then keep them as regression tests)."
  fi
  echo
  echo "Runs that ended before their time limit (the campaign stops a target on any of these"
  echo "unless the input was starved, and is resumed by hand after a look):"
  echo
  python3 - "${dir}" "${KVEDGE_FUZZ_TARGETS[@]}" <<'PY'
import os, re, sys
d, targets = sys.argv[1], sys.argv[2:]
lines = []
for t in targets:
    rows = [r.rstrip("\n").split("\t") for r in open(f"{d}/{t}/runs.tsv")][1:]
    for r in rows:
        run, wall, cpu, code = r[0], float(r[2]), float(r[5]), int(r[9])
        if code == 0:
            continue
        log = open(f"{d}/{t}/logs/run-{run}.log", errors="replace").read()
        timing = open(f"{d}/{t}/logs/run-{run}.time", errors="replace").read()
        what = f"exit {code}"
        if m := re.search(r"ERROR: libFuzzer: timeout after (\d+) seconds", log):
            what = f"libFuzzer timeout after {m[1]} s of wall time"
            if a := re.search(r"Test unit written to (\S+)", log):
                cpu_file = os.path.join(d, t, "crashes", "starved", os.path.basename(a[1]) + ".cpu")
                if os.path.exists(cpu_file):
                    alone = sum(float(x) for x in open(cpu_file).read().split()[-2:])
                    what += f"; alone the input takes {alone:.2f} CPU-s (starved)"
        elif m := re.search(r"Command terminated by signal (\d+)", timing):
            what = f"killed by signal {m[1]}"
            if m[1] == "13" and log.rstrip().endswith("NEW_FUNC[1/4]:"):
                what += " (SIGPIPE) while libFuzzer printed a new function through the external symbolizer"
        elif code == 72:
            what = "interrupted by hand (SIGINT) to restart the campaign with this script"
        lines.append(f"- `{t}` run {run}: {what}. The run had {cpu:.0f} CPU-s in {wall:.0f} s of wall time.")
print("\n".join(lines) if lines else "- none")
PY
  echo
  echo "The GGUF target's last two seeds come from this campaign: on the first two alone (the model"
  echo "read as its first 64 KiB, and its first 12000 B), neither of which parses whole, 184 CPU-s and"
  echo "1.80 M executions left \`LoadGgufModel\` at 2% and \`LoadGgufTokenizer\` at 5% of their regions"
  echo "(\`model_loader.cc\` 15% of lines, \`tokenizer.cc\` 4%). The \`fuzz_gguf\` row is a fresh"
  echo "campaign on all four seeds."
  echo
  echo "### Source coverage of the parsers"
  echo
  echo "Each target's corpus and seeds run once through a clang source-coverage build"
  echo "(\`-fprofile-instr-generate -fcoverage-mapping\`, preset \`fuzz-coverage\`); \`llvm-cov report\`"
  echo "restricted to the files the target exists for. The last column merges all four corpora"
  echo "(e.g. the tokenizers are also reached from the GGUF target). Covered / total, percent."
  echo
  echo "| target | file | lines | functions | regions | lines, all four targets |"
  echo "|---|---|---|---|---|---|"
  python3 - "${cov}" "${root}" "${KVEDGE_FUZZ_TARGETS[@]}" <<'PY'
import json, sys
cov, root, targets = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3:]

def files(path):
    return {f["filename"].replace(root, ""): f["summary"] for f in json.load(open(path))["data"][0]["files"]}

def cell(s):
    return f"{s['covered']}/{s['count']} ({s['percent']:.0f}%)"

everything = files(f"{cov}/all.json")
for t in targets:
    for name, s in files(f"{cov}/{t}.json").items():
        print(f"| `{t}` | `{name}` | {cell(s['lines'])} | {cell(s['functions'])} | {cell(s['regions'])} "
              f"| {cell(everything[name]['lines'])} |")
PY
  echo
  echo "The files also hold code no target is meant to reach (the memory arena and RSS probes in"
  echo "\`memory.cc\`, f16/bf16 conversion in \`kv_format.cc\`, CLI11 flag registration and model"
  echo "loading from disk in \`common.cc\`, \`LoadModel\`/\`LoadTokenizer\` from a path). The functions"
  echo "each target drives, from \`llvm-cov report -show-functions\`:"
  echo
  echo "| target | function | lines | regions |"
  echo "|---|---|---|---|"
  python3 - "${cov}" "${KVEDGE_FUZZ_TARGETS[@]}" <<'PY'
import re, sys
cov, targets = sys.argv[1], sys.argv[2:]
for t in targets:
    rows = {}
    for line in open(f"{cov}/{t}.functions.txt"):
        # Name, then regions, missed, cover, lines, missed, cover, branches, missed, cover.
        f = line.split()
        if len(f) < 10 or not re.fullmatch(r"[\d.]+%|-", f[-1]) or not f[-9].isdigit():
            continue
        name = line[: line.rindex(f[-9], 0, len(line) - len(" ".join(f[-8:])))].strip()
        rows[name] = (int(f[-9]), int(f[-8]), int(f[-6]), int(f[-5]))
    for entry in open(f"{cov}/{t}.entries").read().split():
        for name, (reg, reg_miss, lines, lines_miss) in rows.items():
            if re.match(re.escape(entry) + r"(\[[^]]*\])?\(", name):
                short = entry.replace("kvedge::", "")
                print(f"| `{t}` | `{short}` | {lines - lines_miss}/{lines} ({100 * (lines - lines_miss) / lines:.0f}%) "
                      f"| {reg - reg_miss}/{reg} ({100 * (reg - reg_miss) / reg:.0f}%) |")
                break
PY
  echo
  echo "The profiles, full \`llvm-cov\` reports and per-function lists stay in"
  echo "\`../fuzz-corpus/coverage/\` (\`KVEDGE_FUZZ_DIR\`)."
} >"${out}"
echo "wrote ${out}"
