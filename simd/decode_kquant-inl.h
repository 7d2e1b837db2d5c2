// Per-target decoders of the K-quant super-blocks read through the
// block-tile kernels (Q2_K, Q3_K; Q4_K … Q6_K take matvec_kquant.cc): 256
// weights → f32 with the same f32 operations, in the same order, as the
// table's scalar dequantizers (weight_format.cc), so the values are ggml's
// bit for bit. The packed 6-bit scales are unpacked with scalar code once
// per super-block; the codes a vector at a time. Needs Lanes(df) ≤ 16 (one
// 16-weight sub-block); matvec_blocks.cc falls back to the table beyond.
// Included by matvec_blocks.cc once per target.
#if defined(KVEDGE_SIMD_DECODE_KQUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_DECODE_KQUANT_INL_H_
#undef KVEDGE_SIMD_DECODE_KQUANT_INL_H_
#else
#define KVEDGE_SIMD_DECODE_KQUANT_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "simd/decode_legacy-inl.h"  // LoadBytesI32
#include "simd/half_inline.h"
#include "simd/weight_format.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 16 weights: y = dl·q − ml, q int32 lanes from `code(l)` for l in [0, 16).
template <class DF, class Code>
HWY_INLINE void StoreAffine16(DF df, float dl, float ml, const Code& code, float* y) {
  const auto vd = hn::Set(df, dl), vm = hn::Set(df, ml);
  for (size_t l = 0; l < 16; l += hn::Lanes(df)) {
    hn::StoreU(hn::Sub(hn::Mul(vd, hn::ConvertTo(df, code(l))), vm), df, y + l);
  }
}

template <class DF>
HWY_INLINE void DecodeQ2_K(DF df, const BlockQ2_K& b, float* y) {
  const hn::RebindToSigned<DF> di;
  const float d = HalfToFloat(b.d), min = HalfToFloat(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int n = 0; n < kSuperBlock; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b.scales[is++];
        const uint8_t* qh = q + 16 * half;
        StoreAffine16(df, d * (sc & 0xF), min * (sc >> 4), [&](size_t l) HWY_ATTR {
          return hn::And(hn::Shr(LoadBytesI32(df, qh + l), hn::Set(di, shift)), hn::Set(di, 3));
        }, y);
        y += 16;
      }
    }
  }
}

template <class DF>
HWY_INLINE void DecodeQ3_K(DF df, const BlockQ3_K& b, float* y) {
  const hn::RebindToSigned<DF> di;
  const float d_all = HalfToFloat(b.d);
  int8_t scales[16];
  UnpackQ3KScales(b.scales, scales);
  const uint8_t* q = b.qs;
  int is = 0, bit = 0;
  for (int n = 0; n < kSuperBlock; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, ++bit) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = q + 16 * half;
        const uint8_t* hm = b.hmask + 16 * half;
        // q − (hmask bit ? 0 : 4) = low + 4·bit − 4, an exact integer
        StoreAffine16(df, d_all * (scales[is++] - 32), 0.0f, [&](size_t l) HWY_ATTR {
          const auto low = hn::And(hn::Shr(LoadBytesI32(df, ql + l), hn::Set(di, shift)), hn::Set(di, 3));
          const auto high = hn::And(hn::Shr(LoadBytesI32(df, hm + l), hn::Set(di, bit)), hn::Set(di, 1));
          return hn::Add(low, hn::Sub(hn::ShiftLeft<2>(high), hn::Set(di, 4)));
        }, y);
        y += 16;
      }
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_DECODE_KQUANT_INL_H_
