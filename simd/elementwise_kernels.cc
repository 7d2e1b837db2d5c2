// Elementwise model kernels (RMSNorm, SwiGLU, GELU-tanh, soft-capping, vector
// adds, the f32 dot product) compiled once per Highway target and dispatched
// at run time; declared in model_kernels.h.
#include "platform/hwy_target_policy.h"

#include <cstddef>

#include "simd/model_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/elementwise_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

// Per-target helpers (FloatDot).
#include "simd/matvec_float-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RmsNormT(const float* x, const float* weight, size_t n, float eps, float* out) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  auto acc = hn::Zero(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(df, x + i);
    acc = hn::MulAdd(v, v, acc);
  }
  float ss = hn::GetLane(hn::SumOfLanes(df, acc));
  for (size_t t = i; t < n; ++t) ss += x[t] * x[t];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const auto vscale = hn::Set(df, scale);
  for (i = 0; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + i), vscale), hn::LoadU(df, weight + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

// silu(g)·u with Highway's Exp (≤ 1 ulp on its range). −g is clamped to 88
// so e^−g stays finite; below g = −88 the true result is < 1e−36·|u|.
template <class DF>
HWY_INLINE hn::Vec<DF> SwiGluVec(DF df, hn::Vec<DF> g, hn::Vec<DF> u) {
  const auto e = hn::Exp(df, hn::Min(hn::Neg(g), hn::Set(df, 88.0f)));
  return hn::Mul(hn::Div(g, hn::Add(hn::Set(df, 1.0f), e)), u);
}

void SwiGluT(const float* gate, const float* up, size_t n, float* out) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(SwiGluVec(df, hn::LoadU(df, gate + i), hn::LoadU(df, up + i)), df, out + i);
  }
  if (i == n) return;
  // Tail through one padded vector so it gets the same math as the body.
  HWY_ALIGN float g[HWY_MAX_BYTES / sizeof(float)] = {};
  HWY_ALIGN float u[HWY_MAX_BYTES / sizeof(float)] = {};
  std::copy(gate + i, gate + n, g);
  std::copy(up + i, up + n, u);
  hn::Store(SwiGluVec(df, hn::Load(df, g), hn::Load(df, u)), df, g);
  std::copy(g, g + (n - i), out + i);
}

// Applies op(df, vectors...) over n elements of `out` and one or two inputs;
// the tail goes through one padded vector so it gets the same math.
template <class Op>
HWY_INLINE void Elementwise2(const float* a, const float* b, size_t n, float* out, Op op) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(op(df, hn::LoadU(df, a + i), hn::LoadU(df, b + i)), df, out + i);
  if (i == n) return;
  HWY_ALIGN float ta[HWY_MAX_BYTES / sizeof(float)] = {};
  HWY_ALIGN float tb[HWY_MAX_BYTES / sizeof(float)] = {};
  std::copy(a + i, a + n, ta);
  std::copy(b + i, b + n, tb);
  hn::Store(op(df, hn::Load(df, ta), hn::Load(df, tb)), df, ta);
  std::copy(ta, ta + (n - i), out + i);
}

// gelu_tanh(g)·u = 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³)))·u with
// Highway's Tanh (≤ 4 ulp; saturates to ±1 past |x| ≈ 18.7).
void GeluTanhMulT(const float* gate, const float* up, size_t n, float* out) {
  Elementwise2(gate, up, n, out, [](auto df, auto g, auto u) HWY_ATTR {
    const auto inner = hn::Mul(hn::Set(df, 0.7978845608f), hn::MulAdd(hn::Mul(hn::Set(df, 0.044715f), g),
                                                                      hn::Mul(g, g), g));
    const auto t = hn::Tanh(df, inner);
    return hn::Mul(hn::Mul(hn::Mul(hn::Set(df, 0.5f), g), hn::Add(hn::Set(df, 1.0f), t)), u);
  });
}

// cap·tanh(x/cap).
void SoftCapT(const float* x, size_t n, float cap, float* out) {
  const float inv = 1.0f / cap;
  Elementwise2(x, x, n, out, [cap, inv](auto df, auto v, auto) HWY_ATTR {
    return hn::Mul(hn::Set(df, cap), hn::Tanh(df, hn::Mul(v, hn::Set(df, inv))));
  });
}

void AddInPlaceT(float* acc, const float* x, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(df, acc + i), hn::LoadU(df, x + i)), df, acc + i);
  }
  for (; i < n; ++i) acc[i] += x[i];
}

float DotF32T(const float* a, const float* b, size_t n) { return FloatDot(a, b, n); }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(RmsNormT);
HWY_EXPORT(SwiGluT);
HWY_EXPORT(GeluTanhMulT);
HWY_EXPORT(SoftCapT);
HWY_EXPORT(AddInPlaceT);
HWY_EXPORT(DotF32T);

void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormT)(x, weight, n, eps, out);
}

void SwiGlu(const float* gate, const float* up, size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SwiGluT)(gate, up, n, out);
}

void GeluTanhMul(const float* gate, const float* up, size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(GeluTanhMulT)(gate, up, n, out);
}

void SoftCap(const float* x, size_t n, float cap, float* out) { HWY_DYNAMIC_DISPATCH(SoftCapT)(x, n, cap, out); }

void AddInPlace(float* acc, const float* x, size_t n) { HWY_DYNAMIC_DISPATCH(AddInPlaceT)(acc, x, n); }

float DotF32(const float* a, const float* b, size_t n) { return HWY_DYNAMIC_DISPATCH(DotF32T)(a, b, n); }


}  // namespace kvedge
#endif  // HWY_ONCE
