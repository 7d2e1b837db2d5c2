// A loaded Llama-family model: its configuration and weights, used in place
// from the memory-mapped file. Produced by the GGUF and llama2.c readers.
#ifndef KVEDGE_RUNTIME_MODEL_MODEL_H_
#define KVEDGE_RUNTIME_MODEL_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvcache/kv_cache_plan.h"
#include "platform/mapped_file.h"
#include "runtime/model/gguf.h"
#include "platform/memory.h"
#include "platform/status.h"
#include "simd/model_kernels.h"

namespace kvedge {

// The FFN's gate activation: down(act(gate·x) * (up·x)).
enum class FfnActivation : uint8_t {
  kSilu,      // SwiGLU: llama, qwen2, phi3
  kGeluTanh,  // GeGLU with tanh-approximated GELU: gemma, gemma2
};
// How RoPE frequencies are stretched past the trained context (GGUF
// rope.scaling.type). Frequency-factor tensors (rope_freqs, phi3's
// rope_factors_short/long) apply on top of any of them.
enum class RopeScaling : uint8_t { kNone, kLinear, kYarn };

// Everything the forward pass needs to know about an architecture, read from
// the file's metadata (never assumed from the architecture's name alone,
// except where llama.cpp hard-codes it: rope style, activation, norms).
struct ModelConfig {
  std::string architecture = "llama";  // general.architecture
  std::string name;             // general.name, or the file's base name
  int dim = 0;                  // embedding length
  int hidden_dim = 0;           // FFN inner size
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;           // GQA: n_heads % n_kv_heads == 0
  int head_dim = 0;             // attention.key_length (= value_length); dim / n_heads if absent
  int rope_dim = 0;             // rotated channels per head (≤ head_dim, even)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  int vocab_size = 0;
  int context_length = 0;       // trained context
  RopeStyle rope_style = RopeStyle::kNorm;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_scaling_factor = 1.0f;  // rope.scaling.factor (linear, yarn)
  int rope_original_context = 0;     // rope.scaling.original_context_length (0: context_length)
  float rope_attn_factor = 1.0f;     // rope.scaling.attn_factor: scales cos and sin
  FfnActivation ffn_activation = FfnActivation::kSilu;
  float embedding_scale = 1.0f;      // token embeddings are multiplied by it (gemma: √dim)
  float attn_scale = 0.0f;           // score scale; 0: 1/sqrt(head_dim)
  float attn_softcap = 0.0f;         // > 0: scores → cap·tanh(score/cap) (gemma2)
  float final_softcap = 0.0f;        // > 0: logits → cap·tanh(logit/cap) (gemma2)
  int sliding_window = 0;            // attention.sliding_window; 0: none
  int swa_period = 1;                // windowed layers, as KvShape::Windowed (gemma2: 2, even layers)
};

// Per-layer weights; matrices are [out][in] row-major (y = W x). Optional
// tensors are null when the architecture or file has none.
struct LayerWeights {
  const float* attn_norm = nullptr;   // [dim] f32
  MatrixView wq;                      // [n_heads*head_dim][dim]
  MatrixView wk;                      // [n_kv_heads*head_dim][dim]
  MatrixView wv;                      // [n_kv_heads*head_dim][dim]
  const float* bq = nullptr;          // optional biases (qwen2) [n_heads*head_dim]
  const float* bk = nullptr;          // [n_kv_heads*head_dim]
  const float* bv = nullptr;          // [n_kv_heads*head_dim]
  MatrixView wo;                      // [dim][n_heads*head_dim]
  const float* post_attn_norm = nullptr;  // optional (gemma2) [dim]: norms wo's output before the residual
  const float* ffn_norm = nullptr;    // [dim] f32
  MatrixView w1;                      // gate [hidden][dim]
  MatrixView w3;                      // up   [hidden][dim]
  MatrixView w2;                      // down [dim][hidden]
  const float* post_ffn_norm = nullptr;   // optional (gemma2) [dim]
};

// Owns the mapping (and any converted norm vectors); the views point into it.
// Immutable after loading: safe to share between threads and sessions.
struct ModelWeights {
  ModelConfig config;
  MatrixView token_embedding;         // [vocab][dim]
  std::vector<LayerWeights> layers;
  const float* final_norm = nullptr;  // [dim] f32
  MatrixView output;                  // [vocab][dim] (may alias token_embedding)
  // Optional RoPE frequency divisors per rotated pair [rope_dim/2]:
  // rope_freqs.weight (Llama 3.1), phi3's rope_factors_short/long.
  const float* rope_freqs = nullptr;
  const float* rope_factors_short = nullptr;
  const float* rope_factors_long = nullptr;
  uint64_t weight_bytes = 0;          // bytes of all tensors used

  std::string format;                 // "gguf" or "llama2c"
  // The bytes the views point into: the mapping of `file`, or a caller's
  // buffer (LoadModelFromMemory) that must outlive this object.
  const uint8_t* source = nullptr;
  size_t source_size = 0;
  // The GGUF as parsed once by the loader (null for llama2.c): metadata
  // readers (the tokenizer, the chat template) read it, never re-parse.
  std::unique_ptr<const GgufFile> gguf;

  MappedFile file;                    // the source file
  std::vector<AlignedBuffer> owned;   // f32 copies of norms stored as f16/bf16
};

// The largest sizes a model file may declare (ValidateConfig), and the limits
// that follow from them elsewhere (vocabularies, token histories).
inline constexpr int kMaxDim = 1 << 16;
inline constexpr int kMaxHiddenDim = 1 << 20;
inline constexpr int kMaxLayers = 4096;
inline constexpr int kMaxVocab = 1 << 24;
inline constexpr int kMaxContext = 1 << 24;

// Validates a config: positive sizes, head counts that divide, an even
// rope_dim ≤ head_dim, a head_dim kvedge's cache supports. Errors name the
// offending field and `where` (the file).
Status ValidateConfig(const ModelConfig& c, const std::string& where);

// θ_i, radians per position of each rotated pair [rope_dim/2], for a cache
// of `context` positions, as llama.cpp computes them: base^(−2i/rope_dim)
// divided by the frequency factors (rope_freqs; phi3's long factors when
// context > rope_original_context, else the short ones), then linear scaling
// (÷ factor) or YaRN (interpolation blended by the β_fast = 32 / β_slow = 1 ramp).
std::vector<double> RopeFrequencies(const ModelWeights& w, int context);
// The factor on the rotated channels of q and k: rope_attn_factor, times
// YaRN's 1 + 0.1·ln(factor).
float RopeMagnitude(const ModelConfig& c);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_MODEL_H_
