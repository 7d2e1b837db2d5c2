// Per-target decoders of the legacy 32-weight blocks read through the
// block-tile kernels (Q4_1, Q5_0, Q5_1, IQ4_NL): block → 32 f32 values,
// the same f32 operations as the table's scalar dequantizers
// (weight_format.cc), so the values are ggml's bit for bit. Needs
// Lanes(df) ≤ 16 (a half block); matvec_blocks.cc falls back to the table
// beyond. Included by matvec_blocks.cc once per target.
#if defined(KVEDGE_SIMD_DECODE_LEGACY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_DECODE_LEGACY_INL_H_
#undef KVEDGE_SIMD_DECODE_LEGACY_INL_H_
#else
#define KVEDGE_SIMD_DECODE_LEGACY_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "simd/half_inline.h"
#include "simd/weight_format.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes(df) bytes at p, zero-extended to int32 lanes.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> LoadBytesI32(DF /*df*/, const uint8_t* p) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> du8;
  return hn::PromoteTo(di, hn::LoadU(du8, p));
}

// Q4_1: y = q·d + m.
template <class DF>
HWY_INLINE void DecodeQ4_1(DF df, const BlockQ4_1& b, float* y) {
  const hn::RebindToSigned<DF> di;
  const auto d = hn::Set(df, HalfToFloat(b.d)), m = hn::Set(df, HalfToFloat(b.m));
  for (size_t j = 0; j < 16; j += hn::Lanes(df)) {
    const auto q = LoadBytesI32(df, b.qs + j);
    hn::StoreU(hn::Add(hn::Mul(hn::ConvertTo(df, hn::And(q, hn::Set(di, 15))), d), m), df, y + j);
    hn::StoreU(hn::Add(hn::Mul(hn::ConvertTo(df, hn::ShiftRight<4>(q)), d), m), df, y + j + 16);
  }
}

// Bit 4 of weights j … j+N (half 0) or j+16 … j+16+N (half 1) of a Q5 block.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> HighBits5(DF /*df*/, uint32_t qh, size_t j) {
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::Shr(hn::Set(di, static_cast<int32_t>(qh)), hn::Iota(di, static_cast<int32_t>(j)));
  return hn::ShiftLeft<4>(hn::And(bits, hn::Set(di, 1)));
}

// Q5_0: y = (q − 16)·d; Q5_1: y = q·d + m.
template <bool kMin, class DF, class Block>
HWY_INLINE void DecodeQ5(DF df, const Block& b, float min, float* y) {
  const hn::RebindToSigned<DF> di;
  const auto d = hn::Set(df, HalfToFloat(b.d)), m = hn::Set(df, min);
  const auto offset = hn::Set(di, kMin ? 0 : 16);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (size_t j = 0; j < 16; j += hn::Lanes(df)) {
    const auto q = LoadBytesI32(df, b.qs + j);
    const auto x0 = hn::Sub(hn::Or(hn::And(q, hn::Set(di, 15)), HighBits5(df, qh, j)), offset);
    const auto x1 = hn::Sub(hn::Or(hn::ShiftRight<4>(q), HighBits5(df, qh, j + 16)), offset);
    if constexpr (kMin) {
      hn::StoreU(hn::Add(hn::Mul(hn::ConvertTo(df, x0), d), m), df, y + j);
      hn::StoreU(hn::Add(hn::Mul(hn::ConvertTo(df, x1), d), m), df, y + j + 16);
    } else {
      hn::StoreU(hn::Mul(hn::ConvertTo(df, x0), d), df, y + j);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, x1), d), df, y + j + 16);
    }
  }
}

// IQ4 codebook as f32 (exact: small integers), padded with zeros to the
// widest vector.
HWY_INLINE const float* Iq4Values() {
  alignas(64) static constexpr float kValues[HWY_MAX_BYTES / sizeof(float) > 16 ? HWY_MAX_BYTES / sizeof(float) : 16] =
      {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return kValues;
}

// Codebook values of 4-bit indices idx (int32 lanes): one in-register
// table lookup per Lanes(df) entries of the table (a gather measured no
// faster than scalar code).
template <class DF>
HWY_INLINE hn::Vec<DF> Iq4Lookup(DF df, hn::Vec<hn::RebindToSigned<DF>> idx) {
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  if (N >= 16) return hn::TableLookupLanes(hn::LoadU(df, Iq4Values()), hn::IndicesFromVec(df, idx));
  const auto lane = hn::And(idx, hn::Set(di, static_cast<int32_t>(N - 1)));
  const auto base = hn::AndNot(hn::Set(di, static_cast<int32_t>(N - 1)), idx);  // idx rounded down to N
  auto r = hn::Zero(df);
  for (size_t k = 0; k < 16; k += N) {
    const auto hit = hn::RebindMask(df, hn::Eq(base, hn::Set(di, static_cast<int32_t>(k))));
    r = hn::IfThenElse(hit, hn::TableLookupLanes(hn::LoadU(df, Iq4Values() + k), hn::IndicesFromVec(df, lane)), r);
  }
  return r;
}

// 32 weights of IQ4_NL codes at qs[16]: y = d·value.
template <class DF>
HWY_INLINE void DecodeIq4Codes(DF df, const uint8_t* qs, float d, float* y) {
  const hn::RebindToSigned<DF> di;
  const auto vd = hn::Set(df, d);
  for (size_t j = 0; j < 16; j += hn::Lanes(df)) {
    const auto q = LoadBytesI32(df, qs + j);
    hn::StoreU(hn::Mul(vd, Iq4Lookup(df, hn::And(q, hn::Set(di, 15)))), df, y + j);
    hn::StoreU(hn::Mul(vd, Iq4Lookup(df, hn::ShiftRight<4>(q))), df, y + j + 16);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_DECODE_LEGACY_INL_H_
