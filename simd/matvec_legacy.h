// Internal to simd/: products with the legacy 32-block weights (WeightKernel::kInt8) in
// the row-major layout (WeightLayout::kRows) on int8 activations.
// model_kernels.cc routes MatVec/MatMul here; callers use model_kernels.h.
#ifndef KVEDGE_SIMD_MATVEC_LEGACY_H_
#define KVEDGE_SIMD_MATVEC_LEGACY_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// y[r] = W[r]·x for rows [row_begin, row_end). w: kRows layout, Q8_0 or Q4_0.
void MatVecRowsLegacy(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end);
// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only.
// Equal to MatVecRowsLegacy bit for bit.
void MatMulRowsLegacy(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_LEGACY_H_
