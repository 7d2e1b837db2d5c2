// Matrix products with weights of every type kvedge reads: shape checks, the
// split of rows over threads, and one dispatch per row range to the kernel
// family of the weight type (WeightKernel in weight_format.h):
//   kFloat      F32/F16/BF16          matvec_float.cc
//   kInt8       Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL, kRows   matvec_legacy.cc
//               (Q8_0/Q4_0 only)
//               kInterleaved16        matvec_interleaved.cc
//   kInt8K      Q2_K…Q6_K/IQ4_XS      matvec_kquant.cc, batched matmul_batch.cc
//               Q4_K/Q5_K kInterleaved16  matvec_kquant_interleaved.cc
//               Q6_K kInterleaved16   matvec_q6k_interleaved.cc
//               Q3_K/Q2_K kInterleaved16  matvec_q23k_interleaved.cc
//               IQ4_XS kInterleaved16  matvec_iq4xs_interleaved.cc
// Elementwise kernels (RMSNorm, SwiGLU, adds) live in elementwise_kernels.cc.
//
// Every (weight row, input vector) pair runs the same op sequence whatever
// tile it is computed in, so MatVec with any thread count and MatMul agree
// with single-threaded MatVec bit for bit.
#include "simd/model_kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "simd/matmul_batch.h"
#include "simd/matvec_float.h"
#include "simd/matvec_interleaved.h"
#include "simd/matvec_iq4xs_interleaved.h"
#include "simd/matvec_kquant.h"
#include "simd/matvec_kquant_interleaved.h"
#include "simd/matvec_legacy.h"
#include "simd/matvec_q23k_interleaved.h"

namespace kvedge {

namespace {

// Block formats need whole blocks, and only IsInterleavable types interleave; anything
// else is a caller bug.
void CheckShape(const MatrixView& w) {
  if (w.cols % WeightBlockSize(w.type) != 0) {
    std::fprintf(stderr, "%s:%d: %s matrix has %zu columns, expected a multiple of %u\n", __FILE__, __LINE__,
                 WeightTypeName(w.type), w.cols, WeightBlockSize(w.type));
    std::abort();
  }
  if (w.layout == WeightLayout::kInterleaved16 && !IsInterleavable(w.type)) {
    std::fprintf(stderr, "%s:%d: %s matrix cannot be interleaved\n", __FILE__, __LINE__, WeightTypeName(w.type));
    std::abort();
  }
}

// Interleaved matrices split into whole 16-row groups.
void CheckRowRange(const MatrixView& w, size_t row_begin, size_t row_end) {
  if (w.layout == WeightLayout::kInterleaved16 &&
      (row_begin % kInterleaveRows != 0 || (row_end % kInterleaveRows != 0 && row_end != w.rows))) {
    std::fprintf(stderr, "%s:%d: rows [%zu, %zu) of an interleaved matrix do not start and end on 16-row groups\n",
                 __FILE__, __LINE__, row_begin, row_end);
    std::abort();
  }
}

// Calls fn(row_begin, row_end) over the arena's threads: ranges of rows, of
// whole 16-row groups for interleaved matrices.
template <class F>
void ForRowRanges(const MatrixView& w, ThreadArena* arena, const F& fn) {
  if (arena == nullptr || arena->num_threads() == 1) return fn(0, w.rows);
  if (w.layout == WeightLayout::kRows) {
    return arena->ParallelFor(w.rows, [&](size_t begin, size_t end, int /*thread*/) { fn(begin, end); });
  }
  arena->ParallelFor(InterleavedGroups(w.rows), [&](size_t begin, size_t end, int /*thread*/) {
    fn(begin * kInterleaveRows, std::min(end * kInterleaveRows, w.rows));
  });
}

// One dispatch per contiguous row range, to the kernel family of w's type.
void MatVecRange(const MatrixView& w, const float* x, float* y, size_t begin, size_t end) {
  switch (GetWeightFormat(w.type).kernel) {
    case WeightKernel::kFloat: return MatVecRowsFloat(w, x, y, begin, end);
    case WeightKernel::kInt8:
      if (w.layout == WeightLayout::kInterleaved16) return InterleavedRows(w, x, 1, y, begin, end);
      return MatVecRowsLegacy(w, x, y, begin, end);
    case WeightKernel::kInt8K:
      if (w.layout == WeightLayout::kInterleaved16 && w.type == WeightType::kQ6_K) {
        return Q6KInterleavedRows(w, x, 1, y, begin, end);
      }
      if (w.layout == WeightLayout::kInterleaved16 && (w.type == WeightType::kQ3_K || w.type == WeightType::kQ2_K)) {
        return Q23KInterleavedRows(w, x, 1, y, begin, end);
      }
      if (w.layout == WeightLayout::kInterleaved16 && w.type == WeightType::kIQ4_XS) {
        return IQ4XSInterleavedRows(w, x, 1, y, begin, end);
      }
      if (w.layout == WeightLayout::kInterleaved16) return KQuantInterleavedRows(w, x, 1, y, begin, end);
      return KQuantRows(w, x, 1, y, begin, end);
  }
}

void MatMulRange(const MatrixView& w, const float* x, size_t n, float* y, size_t begin, size_t end) {
  switch (GetWeightFormat(w.type).kernel) {
    case WeightKernel::kFloat: return MatMulRowsFloat(w, x, n, y, begin, end);
    case WeightKernel::kInt8:
      if (w.layout == WeightLayout::kInterleaved16) return InterleavedRows(w, x, n, y, begin, end);
      return MatMulRowsLegacy(w, x, n, y, begin, end);
    case WeightKernel::kInt8K:
      if (w.layout == WeightLayout::kInterleaved16 && w.type == WeightType::kQ6_K) {
        return Q6KInterleavedRows(w, x, n, y, begin, end);
      }
      if (w.layout == WeightLayout::kInterleaved16 && (w.type == WeightType::kQ3_K || w.type == WeightType::kQ2_K)) {
        return Q23KInterleavedRows(w, x, n, y, begin, end);
      }
      if (w.layout == WeightLayout::kInterleaved16 && w.type == WeightType::kIQ4_XS) {
        return IQ4XSInterleavedRows(w, x, n, y, begin, end);
      }
      if (w.layout == WeightLayout::kInterleaved16) return KQuantInterleavedRows(w, x, n, y, begin, end);
      return KQuantBatchRows(w, x, n, y, begin, end);
  }
}

}  // namespace

size_t InterleavedGroupBytes(WeightType t, size_t cols) {
  if (t == WeightType::kQ4_K) return cols / kSuperBlock * InterleavedKSuperBytes;
  if (t == WeightType::kQ5_K) return cols / kSuperBlock * kILQ5SuperBytes;
  if (t == WeightType::kQ6_K) return (InterleavedQ6DOffset(cols / kSuperBlock) + cols / kSuperBlock * 32 + 63) / 64 * 64;
  if (t == WeightType::kQ3_K) return cols / kSuperBlock / 2 * kILQ3PairBytes + cols / kSuperBlock % 2 * (64 + kILQ3BodyBytes);
  if (t == WeightType::kQ2_K) return cols / kSuperBlock * kILQ2SuperBytes;
  if (t == WeightType::kIQ4_XS) return cols / kSuperBlock * kILXSuperBytes;
  const size_t nb = cols / kQuantBlock;
  return nb / 2 * InterleavedPairBytes(t) + nb % 2 * (InterleavedCodeBytes(t) + 2 * InterleavedHeaderBytes(t));
}

size_t MatrixBytes(WeightType t, WeightLayout layout, size_t rows, size_t cols) {
  if (layout == WeightLayout::kRows) return rows * WeightRowBytes(t, cols);
  return InterleavedGroups(rows) * InterleavedGroupBytes(t, cols);
}

void MatVecRows(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  CheckShape(w);
  if (row_begin >= row_end) return;
  CheckRowRange(w, row_begin, row_end);
  MatVecRange(w, x, y, row_begin, row_end);
}

void MatVec(const MatrixView& w, const float* x, float* y, ThreadArena* arena) {
  CheckShape(w);
  // Each thread quantizes x itself (int8 path: O(cols), small next to its
  // rows·cols weight stream).
  ForRowRanges(w, arena, [&](size_t begin, size_t end) { MatVecRange(w, x, y, begin, end); });
}

void MatMul(const MatrixView& w, const float* x, size_t n, float* y, ThreadArena* arena) {
  CheckShape(w);
  if (n == 0) return;
  ForRowRanges(w, arena, [&](size_t begin, size_t end) { MatMulRange(w, x, n, y, begin, end); });
}

}  // namespace kvedge
