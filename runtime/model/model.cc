// ModelConfig validation shared by every reader.
#include "runtime/model/model.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>


namespace kvedge {
namespace {

// Upper bounds well past any Llama-family model; they keep hostile headers
// from driving later size arithmetic and allocations to absurd values.

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
  if (c.rope_scaling != RopeScaling::kNone && (!std::isfinite(c.rope_scaling_factor) || c.rope_scaling_factor <= 0.0f)) {
    return InvalidArgument(where + ": rope.scaling.factor " + std::to_string(c.rope_scaling_factor) +
                           " must be positive");
  }
  if (c.rope_original_context < 0 || c.rope_original_context > kMaxContext) {
    return InvalidArgument(where + ": rope.scaling.original_context_length " + std::to_string(c.rope_original_context) +
                           " is out of range");
  }
  const std::pair<const char*, float> factors[] = {{"rope.scaling.attn_factor", c.rope_attn_factor},
                                                   {"embedding scale", c.embedding_scale},
                                                   {"attention scale", c.attn_scale},
                                                   {"attn_logit_softcapping", c.attn_softcap},
                                                   {"final_logit_softcapping", c.final_softcap}};
  for (const auto& [field, value] : factors) {
    if (!std::isfinite(value) || value < 0.0f || value > 1e6f) {
      return InvalidArgument(where + ": " + field + " " + std::to_string(value) + " must be finite and ≥ 0");
    }
  }
  if (c.rope_attn_factor <= 0.0f || c.embedding_scale <= 0.0f) {
    return InvalidArgument(where + ": rope.scaling.attn_factor and the embedding scale must be positive");
  }
  if (c.sliding_window < 0 || c.swa_period < 0) {
    return InvalidArgument(where + ": attention.sliding_window " + std::to_string(c.sliding_window) +
                           " must be ≥ 0 (0: none)");
  }
  if (!std::isfinite(c.rms_eps) || c.rms_eps <= 0.0f || c.rms_eps > 1.0f) {
    return InvalidArgument(where + ": rms_eps " + std::to_string(c.rms_eps) + " must be in (0, 1]");
  }
  return OkStatus();
}

std::vector<double> RopeFrequencies(const ModelWeights& w, int context) {
  const ModelConfig& c = w.config;
  const int half = c.rope_dim / 2;
  const int original = c.rope_original_context > 0 ? c.rope_original_context : c.context_length;
  const float* factors = w.rope_freqs;
  if (w.rope_factors_long != nullptr && context > original) {
    factors = w.rope_factors_long;
  } else if (w.rope_factors_short != nullptr) {
    factors = w.rope_factors_short;
  }
  const double base = c.rope_theta;
  const double freq_scale = c.rope_scaling == RopeScaling::kNone ? 1.0 : 1.0 / c.rope_scaling_factor;
  // YaRN's ramp between the pairs that keep their frequency (extrapolate) and
  // those that are interpolated (llama.cpp ggml_rope_yarn_corr_dims).
  const auto corr_dim = [&](double n_rot) {
    return c.rope_dim * std::log(original / (n_rot * 2.0 * M_PI)) / (2.0 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(corr_dim(32.0)));
  const double high = std::min(c.rope_dim - 1.0, std::ceil(corr_dim(1.0)));
  std::vector<double> freqs(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    double extrap = std::pow(base, -2.0 * i / c.rope_dim);
    if (factors != nullptr) extrap /= factors[i];
    const double interp = freq_scale * extrap;
    double theta = interp;
    if (c.rope_scaling == RopeScaling::kYarn) {
      const double y = (i - low) / std::max(0.001, high - low);
      const double mix = 1.0 - std::min(1.0, std::max(0.0, y));
      theta = interp * (1.0 - mix) + extrap * mix;
    }
    freqs[static_cast<size_t>(i)] = theta;
  }
  return freqs;
}

float RopeMagnitude(const ModelConfig& c) {
  float m = c.rope_attn_factor;
  if (c.rope_scaling == RopeScaling::kYarn) m *= 1.0f + 0.1f * std::log(c.rope_scaling_factor);
  return m;
}

}  // namespace kvedge
