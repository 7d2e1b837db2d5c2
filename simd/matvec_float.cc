// Products with the float weight types (WeightKernel::kFloat: F32, F16,
// BF16), widened to f32 and accumulated with FMAs, compiled once per Highway
// target. Every (weight row, input vector) pair runs FloatDot's op sequence
// whatever tile it is computed in, so MatVec and MatMul agree bit for bit.
#include "platform/hwy_target_policy.h"

#include <cstddef>

#include "simd/matvec_float.h"
#include "simd/model_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_float.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// Per-target helpers.
#include "simd/matvec_float-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[i] = row w_i · x for four rows: x loaded once per step, four
// independent FMA chains hide the FMA latency.
template <typename WT>
HWY_INLINE void FloatDotRows4(const WT* w0, const WT* w1, const WT* w2, const WT* w3, const float* x, size_t cols,
                              float* out) {
  const hn::ScalableTag<float> df;
  const size_t n = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  size_t c = 0;
  for (; c + n <= cols; c += n) {
    const auto xv = hn::LoadU(df, x + c);
    a0 = hn::MulAdd(LoadWeights(df, w0 + c), xv, a0);
    a1 = hn::MulAdd(LoadWeights(df, w1 + c), xv, a1);
    a2 = hn::MulAdd(LoadWeights(df, w2 + c), xv, a2);
    a3 = hn::MulAdd(LoadWeights(df, w3 + c), xv, a3);
  }
  out[0] = FinishFloatPair(df, a0, w0, x, c, cols);
  out[1] = FinishFloatPair(df, a1, w1, x, c, cols);
  out[2] = FinishFloatPair(df, a2, w2, x, c, cols);
  out[3] = FinishFloatPair(df, a3, w3, x, c, cols);
}

// out[i] = w · x_i for four input vectors: each weight vector is loaded and
// widened once and used four times (prefill).
template <typename WT>
HWY_INLINE void FloatDotVecs4(const WT* w, const float* x0, const float* x1, const float* x2, const float* x3,
                              size_t cols, float* out) {
  const hn::ScalableTag<float> df;
  const size_t n = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  size_t c = 0;
  for (; c + n <= cols; c += n) {
    const auto wv = LoadWeights(df, w + c);
    a0 = hn::MulAdd(wv, hn::LoadU(df, x0 + c), a0);
    a1 = hn::MulAdd(wv, hn::LoadU(df, x1 + c), a1);
    a2 = hn::MulAdd(wv, hn::LoadU(df, x2 + c), a2);
    a3 = hn::MulAdd(wv, hn::LoadU(df, x3 + c), a3);
  }
  out[0] = FinishFloatPair(df, a0, w, x0, c, cols);
  out[1] = FinishFloatPair(df, a1, w, x1, c, cols);
  out[2] = FinishFloatPair(df, a2, w, x2, c, cols);
  out[3] = FinishFloatPair(df, a3, w, x3, c, cols);
}

template <typename WT>
void FloatMatVecRows(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  const WT* w = static_cast<const WT*>(m.data);  // [rows][cols]
  const size_t cols = m.cols;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const WT* w0 = w + r * cols;
    FloatDotRows4(w0, w0 + cols, w0 + 2 * cols, w0 + 3 * cols, x, cols, y + r);
  }
  for (; r < row_end; ++r) y[r] = FloatDot(w + r * cols, x, cols);
}

// Y[n][rows] for rows [row_begin, row_end): the weight row stays in L1 while
// all n input vectors (from L2) pass over it, so weights stream once per call.
template <typename WT>
void FloatMatMulRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  const WT* w = static_cast<const WT*>(m.data);  // [rows][cols]
  const size_t cols = m.cols;
  const size_t rows = m.rows;
  for (size_t r = row_begin; r < row_end; ++r) {
    const WT* wr = w + r * cols;
    size_t v = 0;
    for (; v + 4 <= n; v += 4) {
      float out[4];
      const float* xv = x + v * cols;
      FloatDotVecs4(wr, xv, xv + cols, xv + 2 * cols, xv + 3 * cols, cols, out);
      for (size_t i = 0; i < 4; ++i) y[(v + i) * rows + r] = out[i];
    }
    for (; v < n; ++v) y[v * rows + r] = FloatDot(wr, x + v * cols, cols);
  }
}

void MatVecRowsFloatT(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kF32: return FloatMatVecRows<float>(m, x, y, row_begin, row_end);
    case WeightType::kF16: return FloatMatVecRows<hwy::float16_t>(m, x, y, row_begin, row_end);
    case WeightType::kBF16: return FloatMatVecRows<hwy::bfloat16_t>(m, x, y, row_begin, row_end);
    default: HWY_ABORT("%s: not a float weight type", WeightTypeName(m.type));
  }
}

void MatMulRowsFloatT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kF32: return FloatMatMulRows<float>(m, x, n, y, row_begin, row_end);
    case WeightType::kF16: return FloatMatMulRows<hwy::float16_t>(m, x, n, y, row_begin, row_end);
    case WeightType::kBF16: return FloatMatMulRows<hwy::bfloat16_t>(m, x, n, y, row_begin, row_end);
    default: HWY_ABORT("%s: not a float weight type", WeightTypeName(m.type));
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(MatVecRowsFloatT);
HWY_EXPORT(MatMulRowsFloatT);

void MatVecRowsFloat(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecRowsFloatT)(w, x, y, row_begin, row_end);
}

void MatMulRowsFloat(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulRowsFloatT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
