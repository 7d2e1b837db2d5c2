// llama2.c v0 checkpoints. Layout (floats): embedding[V][D], rms_att[L][D],
// wq[L][D][D], wk[L][KV][D], wv[L][KV][D], wo[L][D][D], rms_ffn[L][D],
// w1[L][H][D], w2[L][D][H], w3[L][H][D], rms_final[D], freq_cis 2x[S][hs/2],
// then wcls[V][D] when the header's vocab size is negative.
#include "runtime/model/llama2c.h"

#include <algorithm>
#include <cstring>

namespace kvedge {
namespace {

// The header's dims, layers, vocabulary and length: ValidateConfig checks each.
constexpr int64_t kMaxHeaderValue = std::max({kMaxDim, kMaxHiddenDim, kMaxLayers, kMaxVocab, kMaxContext});

}  // namespace

StatusOr<std::unique_ptr<ModelWeights>> ReadLlama2c(const uint8_t* data, size_t size, const std::string& name) {
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) != 0) {
    return InvalidArgument(name + ": llama2.c weights must start 4-byte aligned in memory");
  }
  if (size < kLlama2cHeaderBytes) {
    return DataLoss(name + ": truncated: " + std::to_string(size) + " bytes, a llama2.c header needs 28");
  }
  int32_t h[7];
  std::memcpy(h, data, sizeof(h));
  static const char* const kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                                         "seq_len"};
  for (int i = 0; i < 7; ++i) {
    const int64_t v = (i == 5 && h[i] < 0) ? -static_cast<int64_t>(h[i]) : h[i];
    if (v <= 0 || v > kMaxHeaderValue) {
      return InvalidArgument(name + ": llama2.c header field " + kFields[i] + " = " + std::to_string(h[i]) +
                             " at offset " + std::to_string(4 * i) + " is out of range (expected 1.." +
                             std::to_string(kMaxHeaderValue) + (i == 5 ? ", negative for an unshared classifier" : "") +
                             "); is this a llama2.c checkpoint?");
    }
  }
  auto w = std::make_unique<ModelWeights>();
  ModelConfig& c = w->config;
  c.name = name;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  const bool shared_classifier = h[5] > 0;
  c.vocab_size = shared_classifier ? h[5] : -h[5];
  c.context_length = h[6];
  if (c.dim % c.n_heads != 0) {
    return InvalidArgument(name + ": dim " + std::to_string(c.dim) + " is not a multiple of n_heads " +
                           std::to_string(c.n_heads));
  }
  c.head_dim = c.dim / c.n_heads;
  c.rope_dim = c.head_dim;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  KVEDGE_RETURN_IF_ERROR(ValidateConfig(c, name));

  // Sizes in floats; every factor is ≤ 2^24 and checked above, so none of
  // these products or sums can overflow 64 bits.
  const uint64_t D = c.dim, H = c.hidden_dim, L = c.n_layers, V = c.vocab_size, S = c.context_length;
  const uint64_t KV = D / c.n_heads * c.n_kv_heads;
  const uint64_t hs = c.head_dim;
  const uint64_t floats = V * D + L * (D + D * D + 2 * KV * D + D * D + D + 3 * H * D) + D + S * hs +
                          (shared_classifier ? 0 : V * D);
  const uint64_t expected = kLlama2cHeaderBytes + 4 * floats;
  if (expected != size) {
    return DataLoss(name + ": llama2.c file is " + std::to_string(size) + " bytes, but its header (dim " +
                    std::to_string(D) + ", hidden " + std::to_string(H) + ", layers " + std::to_string(L) +
                    ", heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + ", vocab " +
                    std::to_string(h[5]) + ", seq_len " + std::to_string(S) + ") implies " +
                    std::to_string(expected) + " bytes");
  }

  const float* p = reinterpret_cast<const float*>(data + kLlama2cHeaderBytes);
  const auto take = [&p](uint64_t n) {
    const float* q = p;
    p += n;
    return q;
  };
  const auto matrix = [](const float* base, uint64_t rows, uint64_t cols) {
    return MatrixView{WeightType::kF32, base, rows, cols};
  };
  w->token_embedding = matrix(take(V * D), V, D);
  w->layers.resize(L);
  const float* rms_att = take(L * D);
  const float* wq = take(L * D * D);
  const float* wk = take(L * KV * D);
  const float* wv = take(L * KV * D);
  const float* wo = take(L * D * D);
  const float* rms_ffn = take(L * D);
  const float* w1 = take(L * H * D);
  const float* w2 = take(L * D * H);
  const float* w3 = take(L * H * D);
  for (uint64_t l = 0; l < L; ++l) {
    LayerWeights& lw = w->layers[l];
    lw.attn_norm = rms_att + l * D;
    lw.wq = matrix(wq + l * D * D, D, D);
    lw.wk = matrix(wk + l * KV * D, KV, D);
    lw.wv = matrix(wv + l * KV * D, KV, D);
    lw.wo = matrix(wo + l * D * D, D, D);
    lw.ffn_norm = rms_ffn + l * D;
    lw.w1 = matrix(w1 + l * H * D, H, D);
    lw.w2 = matrix(w2 + l * D * H, D, H);
    lw.w3 = matrix(w3 + l * H * D, H, D);
  }
  w->final_norm = take(D);
  take(S * hs);  // freq_cis_real and freq_cis_imag: run.c recomputes RoPE
  w->output = shared_classifier ? w->token_embedding : matrix(take(V * D), V, D);
  w->weight_bytes = 4 * (floats - S * hs);
  w->format = "llama2c";
  w->source = data;
  w->source_size = size;
  return w;
}

}  // namespace kvedge
