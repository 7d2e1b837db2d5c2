# Sourced by scripts/fuzz-smoke.sh and scripts/fuzz-campaign.sh: the seed
# inputs and per-target input caps of the four libFuzzer targets, so smoke
# runs and long campaigns start from the same files with the same flags.
# Seeds come from the shared models and text ($KVEDGE_SHARED), never the repo.

KVEDGE_FUZZ_TARGETS=(fuzz_gguf fuzz_llama2c fuzz_tokenizer fuzz_cli_parse)

# Input caps: llama2.c seeds must stay whole to load (and reach the view
# checks); GGUF parsing is exercised by its first 64 KiB; tokenizer inputs
# are re-encoded whole, so short ones keep the exec rate up.
declare -A KVEDGE_FUZZ_MAX_LEN=([fuzz_gguf]=65536 [fuzz_llama2c]=1100000 [fuzz_tokenizer]=16384
                                [fuzz_cli_parse]=256)

# Flags every run uses besides -max_len (libFuzzer defaults otherwise).
KVEDGE_FUZZ_FLAGS=(-rss_limit_mb=2048 -timeout=20 -print_final_stats=1)

# kvedge_fuzz_seed <shared> <target> <dir>: writes the target's seeds to <dir>.
kvedge_fuzz_seed() {
  local shared="$1" target="$2" dir="$3"
  mkdir -p "${dir}"
  case "${target}" in
    fuzz_gguf)
      cp "${shared}/models/stories260K_llamacpp.gguf" "${dir}/"
      # Small GGUF seeds mutate faster than the 1 MiB model: its header and metadata.
      head -c 12000 "${shared}/models/stories260K_llamacpp.gguf" >"${dir}/head.gguf"
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
    *)
      echo "fuzz-seeds: unknown target '${target}'" >&2
      return 2
      ;;
  esac
}
