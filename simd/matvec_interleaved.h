// Internal to simd/: products with the legacy 32-block weights (WeightKernel::kInt8) in
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
// w: kInterleaved16 layout, IsInterleavable. The integer block dots of
// MatVecRowsLegacy on the same weights in kRows (ref::QuantCode), the f32
// fold per block as fma(dot, dw·dx) then (Q4_1/Q5_1) fma(m, dx·Σx).
void InterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_INTERLEAVED_H_
