// Internal to simd/: products with the block formats whose kernel family is
// WeightKernel::kBlockTile (Q4_1, Q5_0, Q5_1, IQ4_NL).
// model_kernels.cc routes MatVec/MatMul here; callers use model_kernels.h.
#ifndef KVEDGE_SIMD_MATVEC_BLOCKS_H_
#define KVEDGE_SIMD_MATVEC_BLOCKS_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only;
// n = 1 is a matrix–vector product. w: kRows layout, a kBlockTile type.
void BlockTileRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

// out[0, len) = the len weights at src as the kernels decode them (the
// dispatched target's vector decoders; equal to DequantizeRow bit for bit).
// len ≤ 256, a multiple of t's block size. For tests.
void DecodeBlockTile(WeightType t, const void* src, size_t len, float* out);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATVEC_BLOCKS_H_
