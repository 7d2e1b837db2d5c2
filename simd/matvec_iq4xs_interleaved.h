// Internal to simd/: products with IQ4_XS weights in the interleaved layout
// (WeightLayout::kInterleaved16, model_kernels.h) on Q8_K activations, as
// matvec_kquant.h computes them on kRows. model_kernels.cc routes MatVec and
// MatMul here; callers use model_kernels.h.
#ifndef KVEDGE_SIMD_MATVEC_IQ4XS_INTERLEAVED_H_
#define KVEDGE_SIMD_MATVEC_IQ4XS_INTERLEAVED_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only
// (row_begin a multiple of 16, row_end one too or w.rows); n = 1 is MatVec.
// w: IQ4_XS in kInterleaved16. Per (row, vector) and super-block the exact
// integer sum S = Σ (ls − 32)·level·q_x of ref::MatVecRowsQ8K, folded in
// super-block order as acc = fma(d·dx, S, acc): bit for bit on every target
// and call shape.
void IQ4XSInterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin,
                          size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_IQ4XS_INTERLEAVED_H_
