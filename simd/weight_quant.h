// Reference weight quantizers (SIMD-free): f32 rows → GGUF Q8_0 / Q4_0 blocks,
// f16, bf16. Used by the GGUF writer and by tests; bit-exact to ggml's
// quantize_row_q8_0_reference / quantize_row_q4_0_reference.
#ifndef KVEDGE_SIMD_WEIGHT_QUANT_H_
#define KVEDGE_SIMD_WEIGHT_QUANT_H_

#include <cstddef>
#include <cstdint>

#include "simd/model_kernels.h"

namespace kvedge {

// x: f32 [n], n a multiple of kQuantBlock (aborts otherwise); out: [n / 32].
// Per block: d = amax / 127 (stored as f16), q = roundf(x / d) (ties away
// from zero, as ggml). |x − w| ≤ d/2 plus the f16 rounding of d.
void QuantizeRowQ8_0(const float* x, size_t n, BlockQ8_0* out);
// Per block: m = the element with the largest |x| (keeps its sign),
// d = m / −8 (f16), q = min(15, (int8)(x / d + 8.5)) so w = d·(q − 8) and m
// maps exactly to code 0. |x − w| ≤ |d|/2 except the clamp at code 15.
void QuantizeRowQ4_0(const float* x, size_t n, BlockQ4_0* out);
// out: [n] IEEE half / bfloat16 bits, round to nearest even.
void QuantizeRowF16(const float* x, size_t n, uint16_t* out);
void QuantizeRowBF16(const float* x, size_t n, uint16_t* out);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_WEIGHT_QUANT_H_
