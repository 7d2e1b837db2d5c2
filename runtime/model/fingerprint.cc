// Model fingerprint: configuration, tensor layout and a sample of the weights, hashed.
#include "runtime/model/fingerprint.h"

#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvedge {
namespace {

class Hasher {
 public:
  Hasher() { XXH3_64bits_reset(&state_); }
  void Bytes(const void* p, size_t n) { XXH3_64bits_update(&state_, p, n); }
  void U64(uint64_t v) { Bytes(&v, sizeof(v)); }
  void String(const std::string& s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }
  void F32(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    U64(bits);
  }
  uint64_t Digest() const { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

void Tensor(Hasher& h, const std::string& name, const MatrixView& m) {
  h.String(name);
  h.U64(static_cast<uint64_t>(m.type));
  h.U64(m.rows);
  h.U64(m.cols);
}

void Norm(Hasher& h, const std::string& name, const float* v, int dim) {
  h.String(name);
  if (v != nullptr) h.Bytes(v, static_cast<size_t>(dim) * sizeof(float));
}

}  // namespace

ModelFingerprint FingerprintModel(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  Hasher h;
  h.String(c.architecture);
  for (int v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.rope_dim, c.vocab_size,
                c.context_length}) {
    h.U64(static_cast<uint64_t>(static_cast<int64_t>(v)));
  }
  h.F32(c.rope_theta);
  h.F32(c.rms_eps);
  // What the architecture changes in the forward pass (runtime/model/model.h).
  for (int v : {static_cast<int>(c.rope_style), static_cast<int>(c.rope_scaling), c.rope_original_context,
                static_cast<int>(c.ffn_activation), c.sliding_window, c.swa_period}) {
    h.U64(static_cast<uint64_t>(static_cast<int64_t>(v)));
  }
  for (float v : {c.rope_scaling_factor, c.rope_attn_factor, c.embedding_scale, c.attn_scale, c.attn_softcap,
                  c.final_softcap}) {
    h.F32(v);
  }
  const int half_rope = c.rope_dim / 2;
  Norm(h, "rope_freqs.weight", w.rope_freqs, half_rope);
  Norm(h, "rope_factors_short.weight", w.rope_factors_short, half_rope);
  Norm(h, "rope_factors_long.weight", w.rope_factors_long, half_rope);
  Tensor(h, "token_embd.weight", w.token_embedding);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    Norm(h, p + "attn_norm.weight", lw.attn_norm, c.dim);
    Tensor(h, p + "attn_q.weight", lw.wq);
    Tensor(h, p + "attn_k.weight", lw.wk);
    Tensor(h, p + "attn_v.weight", lw.wv);
    const int q_width = c.n_heads * c.head_dim, kv_width = c.n_kv_heads * c.head_dim;
    Norm(h, p + "attn_q.bias", lw.bq, q_width);
    Norm(h, p + "attn_k.bias", lw.bk, kv_width);
    Norm(h, p + "attn_v.bias", lw.bv, kv_width);
    Tensor(h, p + "attn_output.weight", lw.wo);
    Norm(h, p + "post_attention_norm.weight", lw.post_attn_norm, c.dim);
    Norm(h, p + "ffn_norm.weight", lw.ffn_norm, c.dim);
    Tensor(h, p + "ffn_gate.weight", lw.w1);
    Tensor(h, p + "ffn_up.weight", lw.w3);
    Tensor(h, p + "ffn_down.weight", lw.w2);
    Norm(h, p + "post_ffw_norm.weight", lw.post_ffn_norm, c.dim);
  }
  Norm(h, "output_norm.weight", w.final_norm, c.dim);
  Tensor(h, "output.weight", w.output);
  // The token embedding is always row-major and in place (never interleaved).
  const MatrixView& e = w.token_embedding;
  if (e.layout == WeightLayout::kRows && e.data != nullptr && e.rows > 0) {
    const size_t row = WeightRowBytes(e.type, e.cols);
    const uint8_t* base = static_cast<const uint8_t*>(e.data);
    h.Bytes(base, row);
    h.Bytes(base + (e.rows - 1) * row, row);
  }
  ModelFingerprint f;
  f.hash = h.Digest();
  f.description = c.name + ": " + c.architecture + ", " + std::to_string(c.n_layers) + " layers, dim " +
                  std::to_string(c.dim) + ", " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) +
                  " heads, vocab " + std::to_string(c.vocab_size) + ", " + WeightTypeName(w.layers.empty()
                      ? w.output.type : w.layers[0].wq.type);
  return f;
}

}  // namespace kvedge
