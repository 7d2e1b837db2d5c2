// Per-target helpers of the float weight kernels (F32/F16/BF16 widened to
// f32): scalar and vector weight loads and the one-row dot product.
// Included by matvec_float.cc and elementwise_kernels.cc (DotF32) once per
// target.
#if defined(KVEDGE_SIMD_MATVEC_FLOAT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_MATVEC_FLOAT_INL_H_
#undef KVEDGE_SIMD_MATVEC_FLOAT_INL_H_
#else
#define KVEDGE_SIMD_MATVEC_FLOAT_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "simd/half_inline.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ------------------------------ scalar helpers

HWY_INLINE float ScalarWeight(const float* p) { return *p; }
HWY_INLINE float ScalarWeight(const hwy::float16_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return HalfToFloat(bits);
}
HWY_INLINE float ScalarWeight(const hwy::bfloat16_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

// ------------------------------ float weights

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const hwy::float16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}

// Horizontal sum of one pair's accumulator plus its scalar column tail
// [c, cols); identical for every tile shape.
template <class DF, typename WT>
HWY_INLINE float FinishFloatPair(DF df, hn::Vec<DF> acc, const WT* w, const float* x, size_t c, size_t cols) {
  float sum = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; c < cols; ++c) sum += ScalarWeight(w + c) * x[c];
  return sum;
}

// out = Σ_c w[c]·x[c]: one weight row, one input vector. w: [cols] WT.
template <typename WT>
HWY_INLINE float FloatDot(const WT* w, const float* x, size_t cols) {
  const hn::ScalableTag<float> df;
  const size_t n = hn::Lanes(df);
  auto acc = hn::Zero(df);
  size_t c = 0;
  for (; c + n <= cols; c += n) acc = hn::MulAdd(LoadWeights(df, w + c), hn::LoadU(df, x + c), acc);
  return FinishFloatPair(df, acc, w, x, c, cols);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_MATVEC_FLOAT_INL_H_
