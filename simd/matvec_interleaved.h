// Internal to simd/: products with Q8_0/Q4_0 weights (WeightKernel::kInt8) in
// the interleaved layout (WeightLayout::kInterleaved16) on int8 activations.
// model_kernels.cc routes MatVec/MatMul here; callers use model_kernels.h
// (which also declares InterleavedWeightsPreferred, defined with these kernels).
#ifndef KVEDGE_SIMD_MATVEC_INTERLEAVED_H_
#define KVEDGE_SIMD_MATVEC_INTERLEAVED_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only
// (row_begin a multiple of 16, row_end one too or w.rows); n = 1 is MatVec.
// w: kInterleaved16 layout, Q8_0 or Q4_0. Equal to MatVecRowsLegacy on the
// same weights in kRows bit for bit.
void InterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_INTERLEAVED_H_
