// Internal to simd/: products with Q4_K and Q5_K weights in the interleaved layout
// (WeightLayout::kInterleaved16, model_kernels.h) on Q8_K activations, as
// matvec_kquant.h computes them on kRows. model_kernels.cc routes MatVec and
// MatMul here; callers use model_kernels.h.
#ifndef KVEDGE_SIMD_MATVEC_KQUANT_INTERLEAVED_H_
#define KVEDGE_SIMD_MATVEC_KQUANT_INTERLEAVED_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only
// (row_begin a multiple of 16, row_end one too or w.rows); n = 1 is MatVec.
// w: Q4_K or Q5_K in kInterleaved16. Per (row, vector) and super-block the exact
// integer sums S = Σ sc·q_w·q_x and M = Σ min·bsum, folded in super-block
// order as acc = fma(dw·dx, S, acc); acc = fma(−(dmin·dx), M, acc):
// ref::MatVecRowsQ8K bit for bit, on every target and in every call shape.
void KQuantInterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin,
                           size_t row_end);

// The same for Q6_K in kInterleaved16 (matvec_q6k_interleaved.cc): per
// (row, vector) and super-block the exact S = Σ sc·(q − 32)·q_x, folded as
// acc = fma(dw·dx, S, acc): ref::MatVecRowsQ8K bit for bit.
void Q6KInterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_KQUANT_INTERLEAVED_H_
