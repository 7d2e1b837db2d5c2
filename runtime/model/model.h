// A loaded Llama-family model: its configuration and weights, used in place
// from the memory-mapped file. Produced by the GGUF and llama2.c readers.
#ifndef KVEDGE_RUNTIME_MODEL_MODEL_H_
#define KVEDGE_RUNTIME_MODEL_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platform/mapped_file.h"
#include "platform/memory.h"
#include "platform/status.h"
#include "simd/model_kernels.h"

namespace kvedge {

struct ModelConfig {
  std::string architecture = "llama";
  std::string name;             // general.name, or the file's base name
  int dim = 0;                  // embedding length
  int hidden_dim = 0;           // FFN inner size
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;           // GQA: n_heads % n_kv_heads == 0
  int head_dim = 0;             // dim / n_heads
  int rope_dim = 0;             // rotated channels per head (≤ head_dim, even)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  int vocab_size = 0;
  int context_length = 0;       // trained context
};

// Per-layer weights; matrices are [out][in] row-major (y = W x).
struct LayerWeights {
  const float* attn_norm = nullptr;   // [dim] f32
  MatrixView wq;                      // [n_heads*head_dim][dim]
  MatrixView wk;                      // [n_kv_heads*head_dim][dim]
  MatrixView wv;                      // [n_kv_heads*head_dim][dim]
  MatrixView wo;                      // [dim][n_heads*head_dim]
  const float* ffn_norm = nullptr;    // [dim] f32
  MatrixView w1;                      // gate [hidden][dim]
  MatrixView w3;                      // up   [hidden][dim]
  MatrixView w2;                      // down [dim][hidden]
};

// Owns the mapping (and any converted norm vectors); the views point into it.
// Immutable after loading: safe to share between threads and sessions.
struct ModelWeights {
  ModelConfig config;
  MatrixView token_embedding;         // [vocab][dim]
  std::vector<LayerWeights> layers;
  const float* final_norm = nullptr;  // [dim] f32
  MatrixView output;                  // [vocab][dim] (may alias token_embedding)
  uint64_t weight_bytes = 0;          // bytes of all tensors used

  std::string format;                 // "gguf" or "llama2c"
  // The bytes the views point into: the mapping of `file`, or a caller's
  // buffer (LoadModelFromMemory) that must outlive this object. Readers
  // re-parse it for metadata such as the embedded GGUF vocabulary.
  const uint8_t* source = nullptr;
  size_t source_size = 0;

  MappedFile file;                    // the source file
  std::vector<AlignedBuffer> owned;   // f32 copies of norms stored as f16/bf16
};

// Validates a config: positive sizes, head counts that divide, an even
// rope_dim ≤ head_dim, a head_dim kvedge's cache supports. Errors name the
// offending field and `where` (the file).
Status ValidateConfig(const ModelConfig& c, const std::string& where);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_MODEL_H_
