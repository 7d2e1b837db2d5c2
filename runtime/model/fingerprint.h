// A model's fingerprint: what files derived from a model (session files) are
// bound to, so they are never replayed over different weights.
#ifndef KVEDGE_RUNTIME_MODEL_FINGERPRINT_H_
#define KVEDGE_RUNTIME_MODEL_FINGERPRINT_H_

#include <cstdint>
#include <string>

#include "runtime/model/model.h"

namespace kvedge {

struct ModelFingerprint {
  // XXH3-64 over: the configuration (architecture, every size, RoPE θ, RMS
  // ε, vocabulary, trained context); each tensor's name, weight type and
  // shape, in a fixed order; and bytes of the weights themselves — every
  // norm vector and the first and last rows of the token embedding — so two
  // fine-tunes of one architecture differ. Independent of the in-memory
  // layout (interleaved or not) and of the file's path.
  uint64_t hash = 0;
  // For error messages: "stories260K: llama, 5 layers, dim 64, 8/4 heads, vocab 512, F32".
  std::string description;
};

// Reads O(n_layers · dim) bytes of weights. Thread-safe.
ModelFingerprint FingerprintModel(const ModelWeights& model);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_FINGERPRINT_H_
