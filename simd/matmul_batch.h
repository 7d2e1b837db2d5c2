// Internal to simd/: batched-decode products (a few input vectors, one per
// decoding sequence) with the K-quant weight formats of WeightKernel::kInt8K
// (Q4_K, Q5_K, Q6_K). model_kernels.cc routes MatMul with n > 1 here;
// callers use model_kernels.h.
#ifndef KVEDGE_SIMD_MATMUL_BATCH_H_
#define KVEDGE_SIMD_MATMUL_BATCH_H_

#include <cstddef>

#include "simd/model_kernels.h"

namespace kvedge {

// Y[v][w.rows] = X[v][w.cols] · Wᵀ for v < n, rows [row_begin, row_end) only.
// w: kRows layout, a kInt8K type. The same result as KQuantRows
// (matvec_kquant.h) — ref::MatVecRowsQ8K's per (row, vector) fold — bit for
// bit: on AVX-512 VNNI, 2–3 vectors run the single-row kernel per vector over
// L2-sized row tiles; more have each weight super-block decoded once per
// 4-row tile and applied to up to 16 vectors held in the lanes; other
// targets run KQuantRows.
void KQuantBatchRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MATMUL_BATCH_H_
