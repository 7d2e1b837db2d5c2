# Sourced by scripts/fuzz-smoke.sh and scripts/fuzz-campaign.sh: the seed
# inputs and per-target input caps of the libFuzzer targets, so smoke
# runs and long campaigns start from the same files with the same flags.
# Seeds come from the shared models and text ($KVEDGE_SHARED), never the repo;
# one GGUF seed is written by the fuzz build's kvedge (`synth`), so callers
# build the `kvedge` target of the fuzz preset too.

KVEDGE_FUZZ_TARGETS=(fuzz_gguf fuzz_llama2c fuzz_tokenizer fuzz_cli_parse fuzz_jinja fuzz_server_request)

# Input caps: llama2.c seeds must stay whole to load (and reach the view
# checks); GGUF parsing is exercised by its first 64 KiB; tokenizer inputs
# are re-encoded whole, so short ones keep the exec rate up; chat templates
# run to 13 KiB (the largest real one in the kit is 12.5 KiB).
declare -A KVEDGE_FUZZ_MAX_LEN=([fuzz_gguf]=65536 [fuzz_llama2c]=1100000 [fuzz_tokenizer]=16384
                                [fuzz_cli_parse]=256 [fuzz_jinja]=13312
                                [fuzz_server_request]=8192)

# Flags every run uses besides -max_len (libFuzzer defaults otherwise).
KVEDGE_FUZZ_FLAGS=(-rss_limit_mb=2048 -timeout=20 -print_final_stats=1)

# kvedge_fuzz_seed <shared> <target> <dir>: writes the target's seeds to <dir>.
kvedge_fuzz_seed() {
  local shared="$1" target="$2" dir="$3"
  mkdir -p "${dir}"
  case "${target}" in
    fuzz_gguf)
      local gguf="${shared}/models/stories260K_llamacpp.gguf"
      cp "${gguf}" "${dir}/"
      # Small GGUF seeds mutate faster than the 1 MiB model: its header and metadata.
      head -c 12000 "${gguf}" >"${dir}/head.gguf"
      # Neither of those parses whole under the 64 KiB cap, so on their own the
      # loaders behind GgufFile::Parse are barely reached. The real header and
      # metadata with the tensor count set to 0 parse whole: LoadGgufTokenizer
      # builds the real vocabulary and LoadGgufModel reads the real config.
      python3 - "${gguf}" "${dir}/metadata-only.gguf" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF scalar sizes
def skip(p, t):  # offset past a value of type t at p
    if t == 8:
        return p + 8 + struct.unpack_from("<Q", d, p)[0]
    if t == 9:
        et, n = struct.unpack_from("<IQ", d, p)
        p += 12
        for _ in range(n):
            p = skip(p, et)
        return p
    return p + fixed[t]
n_kv = struct.unpack_from("<Q", d, 16)[0]
p = 24
for _ in range(n_kv):
    p = skip(p, 8)  # key
    p = skip(p + 4, struct.unpack_from("<I", d, p)[0])
open(sys.argv[2], "wb").write(d[:8] + struct.pack("<Q", 0) + d[16:p])
PY
      # A whole model under the cap, from kvedge's own writer (synthetic weights
      # and vocabulary): reaches the loader's tensor and shape checks.
      "${KVEDGE_FUZZ_KVEDGE:-$(dirname "${BASH_SOURCE[0]}")/../build/fuzz/kvedge}" synth \
        --dims 32,1,2,1,64,300,64 --weights q4_0 -o "${dir}/synth-q4_0.gguf" 2>/dev/null
      ;;
    fuzz_llama2c)
      cp "${shared}/models/stories260K.bin" "${shared}/models/aidreams260K.bin" "${dir}/"
      ;;
    fuzz_tokenizer)
      cp "${shared}/models/tok512.bin" "${shared}/models/aidreams260K_tok512.bin" "${dir}/"
      local f
      for f in "${shared}"/data/*.txt; do
        head -c 4096 "${f}" >"${dir}/$(basename "${f}").head"
      done
      ;;
    fuzz_cli_parse)
      printf '64MiB\0int4\0sinks\0int8\0int4\0in-cache\0\0\0\0\0\0\0' >"${dir}/budget"
      printf '\0f16\0h2o\0\0\0absolute\0x\0ab\0cd\0ef\0g\0h' >"${dir}/capacity"
      ;;
    fuzz_jinja)
      # The real chat templates of the conformance kit.
      cp "${shared}"/conformance/chat/templates/*.jinja "${dir}/"
      ;;
    fuzz_server_request)
      # Request bodies of each endpoint's shape (server requests are JSON).
      printf '%s' '{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi \u00e9"}]}],"max_tokens":16,"temperature":0.7,"top_p":0.9,"seed":1,"stop":["\n","END"],"stream":true}' >"${dir}/chat.json"
      printf '%s' '{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":null},{"role":"user","content":"b"}],"stop":"x","n":1}' >"${dir}/turns.json"
      printf '%s' '{"prompt":["Once upon a time"],"max_tokens":4}' >"${dir}/completion.json"
      printf '%s' '{"content":"Once upon","add_special":true,"tokens":[1,403,511]}' >"${dir}/tokens.json"
      ;;
    *)
      echo "fuzz-seeds: unknown target '${target}'" >&2
      return 2
      ;;
  esac
}
