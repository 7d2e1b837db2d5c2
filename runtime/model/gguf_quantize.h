// Re-encoding a GGUF model's weights with llama-quantize's presets
// (`kvedge quantize`): per tensor the type llama.cpp would choose, all
// metadata carried over. See docs/weight-types.md for the type mix.
#ifndef KVEDGE_RUNTIME_MODEL_GGUF_QUANTIZE_H_
#define KVEDGE_RUNTIME_MODEL_GGUF_QUANTIZE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "platform/status.h"
#include "runtime/model/gguf.h"
#include "simd/weight_format.h"

namespace kvedge {

// A llama-quantize preset: its name, the general.file_type it writes
// (llama_ftype) and the base type of its matrices.
struct QuantizePreset {
  const char* name;  // "Q4_K_M"
  uint32_t ftype;
  WeightType base;
};
// Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 Q3_K_M Q2_K IQ4_NL IQ4_XS (case-insensitive);
// nullptr if unknown.
const QuantizePreset* FindQuantizePreset(std::string_view name);
// "Q4_K_M, Q5_K_M, …" for messages.
std::string QuantizePresetNames();

// The type llama-quantize gives tensor `name` (2-D, row length `cols`) in a
// model with `n_layers` blocks and n_head / n_head_kv = `gqa`; `layer` is the
// tensor's block (−1 for token_embd / output).
WeightType ChooseTensorType(const QuantizePreset& p, std::string_view name, uint64_t cols, int layer, int n_layers,
                            int gqa);

// One line of progress per tensor.
struct QuantizeProgress {
  int index, count;        // tensor index (0-based) and total
  std::string_view name;
  const char* from;        // ggml names
  const char* to;
  uint64_t rows, cols;
  bool requantized;        // a quantized source re-quantized (lossy twice)
};

// Writes `in` to `out_path` with its 2-D weights re-encoded for preset `p`;
// other tensors and all metadata are copied (general.file_type updated,
// general.quantization_version 2). Tensors whose type is unchanged are copied
// byte for byte. Errors: tensor types kvedge cannot read, I/O.
Status QuantizeGguf(const GgufFile& in, const std::string& out_path, const QuantizePreset& p,
                    const std::function<void(const QuantizeProgress&)>& progress);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_GGUF_QUANTIZE_H_
