// Sampler: greedy, temperature, top-k and top-p (nucleus) sampling over
// logits, reproducible from a seed. Buffers are sized once for the vocabulary.
#ifndef KVEDGE_RUNTIME_ENGINE_SAMPLER_H_
#define KVEDGE_RUNTIME_ENGINE_SAMPLER_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "platform/status.h"

namespace kvedge {

struct SamplerOptions {
  float temperature = 0.8f;  // 0 → greedy (argmax)
  int top_k = 40;            // ≤ 0 → no top-k cut
  float top_p = 0.95f;       // 1 → no nucleus cut
  uint64_t seed = 0;
};

// Not thread-safe; one per stream.
class Sampler {
 public:
  // Errors: negative temperature, top_p outside (0, 1], vocab < 1.
  static StatusOr<Sampler> Create(const SamplerOptions& options, int vocab_size);

  // Picks a token from logits [vocab]. Allocation-free.
  int Sample(const float* logits);

  const SamplerOptions& options() const { return options_; }
  // The random generator's state in the C++ standard's text form (the same
  // on every platform), for session files; SetRngState restores it so the
  // next samples repeat. Errors: text that is no such state (nothing changes).
  std::string RngState() const;
  Status SetRngState(std::string_view state);

 private:
  Sampler(const SamplerOptions& options, int vocab_size);

  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::vector<int> order_;     // [vocab] candidate ids
  std::vector<float> probs_;   // [vocab]
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_ENGINE_SAMPLER_H_
