// Internal to simd/: products with the K-quant weight formats of
// WeightKernel::kInt8K (Q4_K, Q5_K, Q6_K) on int8 activations, as llama.cpp
// computes them: the activation row is quantized once per call to ggml's
// Q8_K blocks (256 int8 codes, an f32 scale, sums per 16) and every
// super-block's dot product is exact integer arithmetic; model_kernels.cc
// routes MatVec/MatMul here. Callers use model_kernels.h.
#ifndef KVEDGE_SIMD_MATVEC_KQUANT_H_
#define KVEDGE_SIMD_MATVEC_KQUANT_H_

#include <cstddef>
#include <cstdint>

#include "simd/model_kernels.h"
#include "simd/weight_format.h"

namespace kvedge {

// ggml's block_q8_K: x[j] ≈ d·qs[j]; bsums[i] = Σ qs[16i … 16i+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kSuperBlock];
  int16_t bsums[kSuperBlock / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "ggml block_q8_K");

// ggml's quantize_row_q8_K_ref, bit for bit: per 256 activations, max = the
// value of largest magnitude (the first one on ties), iscale = −127/max,
// qs = min(127, nearest-even(iscale·x)), d = 1/iscale (all zero when max is
// 0). x: f32 [n]; out: [n/256]; n a multiple of 256. Scalar, O(n).
void QuantizeRowQ8_K(const float* x, BlockQ8_K* out, size_t n);
// QuantizeRowQ8_K bit for bit, vectorized for this CPU (the kernels' own).
void QuantizeRowQ8KFast(const float* x, BlockQ8_K* out, size_t n);

// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only;
// n = 1 is a matrix–vector product. w: kRows layout, a kInt8K type. Per
// (row, vector) and super-block, with S the exact Σ sc·q_w·q_x and M the
// exact Σ min·bsum (Q4_K/Q5_K; Q6_K has none), in super-block order:
//   acc = fma(dw·dx, S, acc); acc = fma(−(dmin·dx), M, acc)
// — ref::MatVecRowsQ8K bit for bit, on every target and in every call shape.
void KQuantRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_KQUANT_H_
