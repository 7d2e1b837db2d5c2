// ModelConfig validation shared by every reader.
#include "runtime/model/model.h"

#include <cmath>

#include "simd/kv_format.h"

namespace kvedge {
namespace {

// Upper bounds well past any Llama-family model; they keep hostile headers
// from driving later size arithmetic and allocations to absurd values.
constexpr int kMaxDim = 1 << 16;
constexpr int kMaxHiddenDim = 1 << 20;
constexpr int kMaxLayers = 4096;
constexpr int kMaxVocab = 1 << 24;
constexpr int kMaxContext = 1 << 24;

Status CheckRange(const char* field, int value, int max, const std::string& where) {
  if (value <= 0 || value > max) {
    return InvalidArgument(where + ": " + field + " = " + std::to_string(value) + " is out of range (expected 1.." +
                           std::to_string(max) + ")");
  }
  return OkStatus();
}

}  // namespace

Status ValidateConfig(const ModelConfig& c, const std::string& where) {
  KVEDGE_RETURN_IF_ERROR(CheckRange("dim", c.dim, kMaxDim, where));
  KVEDGE_RETURN_IF_ERROR(CheckRange("hidden_dim", c.hidden_dim, kMaxHiddenDim, where));
  KVEDGE_RETURN_IF_ERROR(CheckRange("n_layers", c.n_layers, kMaxLayers, where));
  KVEDGE_RETURN_IF_ERROR(CheckRange("n_heads", c.n_heads, c.dim, where));
  KVEDGE_RETURN_IF_ERROR(CheckRange("n_kv_heads", c.n_kv_heads, c.n_heads, where));
  KVEDGE_RETURN_IF_ERROR(CheckRange("vocab_size", c.vocab_size, kMaxVocab, where));
  KVEDGE_RETURN_IF_ERROR(CheckRange("context_length", c.context_length, kMaxContext, where));
  if (c.dim % c.n_heads != 0 || c.head_dim != c.dim / c.n_heads) {
    return InvalidArgument(where + ": dim " + std::to_string(c.dim) + " is not n_heads " + std::to_string(c.n_heads) +
                           " x head_dim " + std::to_string(c.head_dim));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return InvalidArgument(where + ": n_heads " + std::to_string(c.n_heads) + " is not a multiple of n_kv_heads " +
                           std::to_string(c.n_kv_heads));
  }
  if (!IsSupportedHeadDim(c.head_dim)) {
    return Unsupported(where + ": head_dim " + std::to_string(c.head_dim) +
                       " is not supported by kvedge's KV cache (a multiple of 8 up to 256)");
  }
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return InvalidArgument(where + ": rope_dim " + std::to_string(c.rope_dim) + " must be even and in 2..head_dim (" +
                           std::to_string(c.head_dim) + ")");
  }
  if (!std::isfinite(c.rope_theta) || c.rope_theta <= 0.0f) {
    return InvalidArgument(where + ": rope_theta " + std::to_string(c.rope_theta) + " must be positive");
  }
  if (!std::isfinite(c.rms_eps) || c.rms_eps <= 0.0f || c.rms_eps > 1.0f) {
    return InvalidArgument(where + ": rms_eps " + std::to_string(c.rms_eps) + " must be in (0, 1]");
  }
  return OkStatus();
}

}  // namespace kvedge
