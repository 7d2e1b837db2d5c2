#!/usr/bin/env bash
# kvedge perplexity --tokens --save-logits on the architecture kit: the ids
# are used as given, the file holds [128 × 512] little-endian f32 logits, and
# their mean KL to llama.cpp's (f32 cache) is within the README's limit.
# Usage: perplexity_logits.sh SHARED_DIR COMMAND [ARGS...]
set -euo pipefail
shared="$1"
shift
kit="$shared/conformance/architectures"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for model in qwen2 gemma2; do
  "$@" perplexity -m "$kit/$model.gguf" --tokens "$kit/tokens.json" --save-logits "$dir/$model.f32" \
    --policy full -c 512 --kv f32 --json >"$dir/$model.json" || fail "$model: exit $?"
  grep -q '"tokens":127' "$dir/$model.json" || fail "$model: expected 127 scored tokens: $(cat "$dir/$model.json")"
  size=$(stat -c %s "$dir/$model.f32")
  [[ $size -eq $((128 * 512 * 4)) ]] || fail "$model: $size bytes of logits, expected 128 x 512 x 4"
  limit=$([[ $model == gemma2 ]] && echo 2e-3 || echo 1e-8)
  # Mean over rows of KL(P_llama.cpp ‖ P_kvedge), in awk's doubles.
  paste <(od --endian=little -An -v -tf4 -w4 "$kit/$model.logits.f32") \
        <(od --endian=little -An -v -tf4 -w4 "$dir/$model.f32") |
    awk -v V=512 -v limit="$limit" -v name="$model" '
      { p[n] = $1; q[n] = $2; n++
        if (n == V) {
          mp = p[0]; mq = q[0]
          for (i = 1; i < V; i++) { if (p[i] > mp) mp = p[i]; if (q[i] > mq) mq = q[i] }
          zp = 0; zq = 0
          for (i = 0; i < V; i++) { zp += exp(p[i] - mp); zq += exp(q[i] - mq) }
          lzp = log(zp) + mp; lzq = log(zq) + mq; kl = 0
          for (i = 0; i < V; i++) kl += exp(p[i] - lzp) * ((p[i] - lzp) - (q[i] - lzq))
          sum += kl; rows++; n = 0 } }
      END { mean = sum / rows
            printf "%s: %d rows, mean KL %.3g (limit %s)\n", name, rows, mean, limit
            exit !(rows == 128 && mean <= limit) }' || fail "$model: logits differ from llama.cpp's"
done
echo "ok"
