// Internal to simd/: products with the float weight types of
// WeightKernel::kFloat (F32, F16, BF16), widened to f32.
// model_kernels.cc routes MatVec/MatMul here; callers use model_kernels.h.
#ifndef KVEDGE_SIMD_MATVEC_FLOAT_H_
#define KVEDGE_SIMD_MATVEC_FLOAT_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// y[r] = W[r]·x for rows [row_begin, row_end). w: kRows layout, a kFloat type.
void MatVecRowsFloat(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end);
// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only;
// each weight row is read once per call. Equal to MatVecRowsFloat bit for bit.
void MatMulRowsFloat(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_FLOAT_H_
