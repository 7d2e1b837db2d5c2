// ggml's reference Q8_0 / Q4_0 row quantizers and dequantizers (bit-exact
// with ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref).
// NOTE: duplicates simd/weight_quant.h (being written on another branch);
// unify at merge.
#ifndef KVEDGE_RUNTIME_MODEL_QUANTIZE_H_
#define KVEDGE_RUNTIME_MODEL_QUANTIZE_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// n is a multiple of kQuantBlock; y holds n / 32 blocks. Pure functions,
// thread-safe.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, size_t n);
void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, size_t n);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_QUANTIZE_H_
