// K-quant (Q4_K, Q5_K, Q6_K) matrix products on Q8_K activations, per
// Highway target: llama.cpp's integer dot product. Each call quantizes its
// input vectors once per chunk of 64 super-blocks (16384 columns) to Q8_K
// (QuantizeQ8K, then widened to int16 on the stack: no heap). Each
// weight super-block is decoded to int16 sub-block scale × code (|·| ≤ 4096)
// — once per pass of up to kVecTile vectors into a 512-byte tile (MatMul),
// or straight into the products (MatVec) — which meets the int16 activation
// codes in int16×int16→int32 multiply-adds (exact: |S| < 2^31); one
// horizontal sum per super-block and vector gives
// S, and two scalar FMAs fold it (and the mins term) into the f32 running
// sum in super-block order. Every (row, vector) pair runs the same op
// sequence in any call shape, so MatVec with any thread count, MatMul and
// ref::MatVecRowsQ8K agree bit for bit. MatVec on AVX3/AVX3_DL takes its own
// path (AvxMatVecRows: unwidened code bytes, four rows per pass, Q2_K/Q3_K
// eight, the same folds lane by lane), and on AVX2 matvec_kquant_avx2-inl.h's
// (eight rows).
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "simd/half_inline.h"
#include "simd/matvec_kquant.h"
#include "simd/weight_format.h"
#include "simd/arm_dotprod.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_kquant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kChunkSuperBlocks = 64;  // activations quantized per chunk (16384 columns)
constexpr size_t kVecTile = 4;            // input vectors per decode of a super-block

// One input vector's Q8_K activations over one chunk, codes widened to int16.
struct ActChunk {
  HWY_ALIGN int16_t q[kChunkSuperBlocks * kSuperBlock];  // [super-block][256] codes
  float d[kChunkSuperBlocks];                            // [super-block] scales
  int32_t bsum16[kChunkSuperBlocks][16];                 // [super-block][group of 16] Σ codes
#if KVEDGE_HWY_ARM_DOT_TARGET
  int8_t q8[kChunkSuperBlocks * kSuperBlock];  // [super-block][256] the codes as int8 (matvec_kquant_arm-inl.h)
#endif
};

// QuantizeRowQ8_K bit for bit, vectorized (NearestInt is nearbyint's
// round-half-even; the scalar target's rounds by adding ½, so that target,
// and any block holding a NaN, takes the scalar definition). x: f32
// [nsb·256] → out[nsb].
HWY_INLINE void QuantizeQ8K(const float* HWY_RESTRICT x, BlockQ8_K* HWY_RESTRICT out, size_t nsb) {
#if HWY_TARGET == HWY_SCALAR
  QuantizeRowQ8_K(x, out, nsb * kSuperBlock);
#else
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(di)> di8;
  const size_t n = hn::Lanes(df);
  for (size_t s = 0; s < nsb; ++s) {
    const float* xs = x + s * kSuperBlock;
    BlockQ8_K& b = out[s];
    auto vmax = hn::Zero(df);
    auto nan = hn::Lt(vmax, vmax);  // all false
    for (size_t i = 0; i < kSuperBlock; i += n) {
      const auto v = hn::LoadU(df, xs + i);
      vmax = hn::Max(vmax, hn::Abs(v));
      nan = hn::Or(nan, hn::IsNaN(v));
    }
    if (!hn::AllFalse(df, nan)) {
      QuantizeRowQ8_K(xs, &b, kSuperBlock);
      continue;
    }
    const auto amax = hn::MaxOfLanes(df, vmax);  // broadcast
    if (hn::GetLane(amax) == 0.0f) {
      b = BlockQ8_K{};
      continue;
    }
    float max = 0.0f;  // the first value of largest magnitude (it exists: amax is one of them)
    for (size_t i = 0; i < kSuperBlock; i += n) {
      const intptr_t j = hn::FindFirstTrue(df, hn::Eq(hn::Abs(hn::LoadU(df, xs + i)), amax));
      if (j >= 0) {
        max = xs[i + static_cast<size_t>(j)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const auto vscale = hn::Set(df, iscale);
    const auto k127 = hn::Set(di, 127);
    const bool vector_sums = 16 % n == 0;  // whole vectors per 16 codes
    auto part = hn::Zero(di);
    for (size_t i = 0; i < kSuperBlock; i += n) {
      const auto q = hn::Min(hn::NearestInt(hn::Mul(vscale, hn::LoadU(df, xs + i))), k127);
      hn::StoreU(hn::DemoteTo(di8, q), di8, b.qs + i);
      if (vector_sums) {
        part = hn::Add(part, q);
        if ((i + n) % 16 == 0) {
          b.bsums[i / 16] = static_cast<int16_t>(hn::GetLane(hn::SumOfLanes(di, part)));
          part = hn::Zero(di);
        }
      }
    }
    if (!vector_sums) {
      for (int j = 0; j < kSuperBlock / 16; ++j) {
        int sum = 0;
        for (int k = 0; k < 16; ++k) sum += b.qs[16 * j + k];
        b.bsums[j] = static_cast<int16_t>(sum);
      }
    }
    b.d = 1.0f / iscale;
  }
#endif
}

// Quantizes x: f32 [nsb·256] into c (nsb ≤ kChunkSuperBlocks).
HWY_INLINE void PrepareChunk(const float* x, size_t nsb, ActChunk* c) {
  BlockQ8_K blocks[kChunkSuperBlocks];
  QuantizeQ8K(x, blocks, nsb);
  const hn::ScalableTag<int16_t> d16;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const size_t n = hn::Lanes(d16);
  for (size_t s = 0; s < nsb; ++s) {
    for (size_t i = 0; i < kSuperBlock; i += n) {
      hn::Store(hn::PromoteTo(d16, hn::LoadU(d8, blocks[s].qs + i)), d16, c->q + s * kSuperBlock + i);
    }
    c->d[s] = blocks[s].d;
    for (int j = 0; j < 16; ++j) c->bsum16[s][j] = blocks[s].bsums[j];
#if KVEDGE_HWY_ARM_DOT_TARGET
    // Only where the dot path runs (UseArmKDot: every SVE target, NEON with dotprod).
    if (HWY_TARGET != HWY_NEON || ArmHasDotProd()) std::memcpy(c->q8 + s * kSuperBlock, blocks[s].qs, kSuperBlock);
#endif
  }
}

// Σ w[i]·x[i] over one super-block, exact. w, x: [256] int16, aligned.
HWY_INLINE int32_t TileDot(const int16_t* HWY_RESTRICT w, const int16_t* HWY_RESTRICT x) {
  const hn::ScalableTag<int16_t> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const size_t n = hn::Lanes(d16);
  auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
  for (size_t i = 0; i < static_cast<size_t>(kSuperBlock); i += n) {
    s0 = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, w + i), hn::Load(d16, x + i), s0, s1);
  }
  return hn::GetLane(hn::SumOfLanes(d32, hn::RearrangeToOddPlusEven(s0, s1)));
}

// ------------------------------ decoders: super-block → scale·code
// Each decoder walks a super-block in ggml's weight order, a vector of int16
// scale·code (|·| ≤ 4096) at a time, and either stores it into an aligned
// [256] int16 tile (kDot false: MatMul decodes once for up to kVecTile
// vectors) or multiply-adds it straight into s0/s1 against the activation
// codes x (kDot true: MatVec, no tile round trip). D16 has ≤ 32 lanes, so a
// vector spans at most one 32-weight group.
using D16x32 = hn::CappedTag<int16_t, 32>;
using D32x16 = hn::Repartition<int32_t, D16x32>;
using V16x32 = hn::Vec<D16x32>;
using V32x16 = hn::Vec<D32x16>;

template <bool kDot>
HWY_INLINE void Emit(V16x32 w, size_t off, int16_t* tile, const int16_t* x, V32x16& s0, V32x16& s1) {
  const D16x32 d16;
  if constexpr (kDot) {
    s0 = hn::ReorderWidenMulAccumulate(D32x16(), w, hn::Load(d16, x + off), s0, s1);
  } else {
    hn::Store(w, d16, tile + off);
  }
}

// Scales of lanes [l, l + N) of a 32-weight group whose first 16 weights
// have scale a and last 16 scale b (l a multiple of N).
HWY_INLINE V16x32 GroupScales(int a, int b, size_t l) {
  const D16x32 d16;
  const auto va = hn::Set(d16, static_cast<int16_t>(a)), vb = hn::Set(d16, static_cast<int16_t>(b));
  if (hn::Lanes(d16) <= 16) return l < 16 ? va : vb;
  return hn::IfThenElse(hn::Lt(hn::Iota(d16, 0), hn::Set(d16, 16)), va, vb);
}

// The 8 scales (sc[0, 8)) and 8 mins (sc[8, 16)) of a Q4_K/Q5_K super-block
// from its 12 packed bytes: ggml's get_scale_min_k4 for all j at once, with
// 32-bit word operations (ggml's vec_dot unpacking).
HWY_INLINE void UnpackScalesMins(const uint8_t* packed, uint8_t* sc) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t mins_lo = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = mins_lo;
  u[0] &= kmask1;
  std::memcpy(sc, u, 16);
}

// Q4_K (qh null) and Q5_K: sc·q; mins[g] = the min of weights [16g, 16g + 16).
template <bool kDot, class Block>
HWY_INLINE void DecodeQ45(const Block& b, const uint8_t* qh, int16_t* tile, const int16_t* x, int32_t* mins,
                          V32x16& s0, V32x16& s1) {
  const D16x32 d16;
  const hn::Rebind<uint8_t, D16x32> du8;
  const size_t n = hn::Lanes(d16);
  const auto k15 = hn::Set(d16, 15), k1 = hn::Set(d16, 1);
  uint8_t sc[16];  // [8] scales, [8] mins
  UnpackScalesMins(b.scales, sc);
  for (int g = 0; g < 16; ++g) mins[g] = sc[8 + g / 2];
  for (int j = 0; j < 4; ++j) {
    const auto vs_lo = hn::Set(d16, static_cast<int16_t>(sc[2 * j]));
    const auto vs_hi = hn::Set(d16, static_cast<int16_t>(sc[2 * j + 1]));
    const uint8_t* q = b.qs + 32 * j;
    for (size_t l = 0; l < 32; l += n) {
      const auto bytes = hn::PromoteTo(d16, hn::LoadU(du8, q + l));
      auto lo = hn::And(bytes, k15);
      auto hi = hn::ShiftRight<4>(bytes);
      if (qh != nullptr) {
        const auto h = hn::PromoteTo(d16, hn::LoadU(du8, qh + l));
        lo = hn::Or(lo, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * j), k1)));
        hi = hn::Or(hi, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * j + 1), k1)));
      }
      Emit<kDot>(hn::Mul(lo, vs_lo), 64 * j + l, tile, x, s0, s1);
      Emit<kDot>(hn::Mul(hi, vs_hi), 64 * j + 32 + l, tile, x, s0, s1);
    }
  }
}

// Q6_K: sc·(q − 32); weight i has scale scales[i / 16].
template <bool kDot>
HWY_INLINE void DecodeQ6(const BlockQ6_K& b, int16_t* tile, const int16_t* x, V32x16& s0, V32x16& s1) {
  const D16x32 d16;
  const hn::Rebind<uint8_t, D16x32> du8;
  const size_t n = hn::Lanes(d16);
  const auto k15 = hn::Set(d16, 15), k3 = hn::Set(d16, 3), k32 = hn::Set(d16, 32);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (size_t half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8) {
    const size_t o = 128 * half;
    for (size_t l = 0; l < 32; l += n) {
      const auto lo0 = hn::PromoteTo(d16, hn::LoadU(du8, ql + l));
      const auto lo1 = hn::PromoteTo(d16, hn::LoadU(du8, ql + l + 32));
      const auto h = hn::PromoteTo(d16, hn::LoadU(du8, qh + l));
      const auto q1 = hn::Sub(hn::Or(hn::And(lo0, k15), hn::ShiftLeft<4>(hn::And(h, k3))), k32);
      const auto q2 = hn::Sub(hn::Or(hn::And(lo1, k15), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), k3))), k32);
      const auto q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(lo0), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), k3))), k32);
      const auto q4 = hn::Sub(hn::Or(hn::ShiftRight<4>(lo1), hn::ShiftLeft<4>(hn::ShiftRight<6>(h))), k32);
      Emit<kDot>(hn::Mul(q1, GroupScales(sc[0], sc[1], l)), o + l, tile, x, s0, s1);
      Emit<kDot>(hn::Mul(q2, GroupScales(sc[2], sc[3], l)), o + l + 32, tile, x, s0, s1);
      Emit<kDot>(hn::Mul(q3, GroupScales(sc[4], sc[5], l)), o + l + 64, tile, x, s0, s1);
      Emit<kDot>(hn::Mul(q4, GroupScales(sc[6], sc[7], l)), o + l + 96, tile, x, s0, s1);
    }
  }
}

// Q2_K (hm null) and Q3_K: sc[g]·q for weight i = 128h + 32j + l of group
// g = i / 16, q = bits 2j of qs[32h + l] (Q3_K: minus 4 unless bit 4h + j of
// hm[l] is set). sc: [16] scales (Q3_K: signed, the stored value − 32).
template <bool kDot>
HWY_INLINE void DecodeQ23(const uint8_t* qs, const uint8_t* hm, const int* sc, int16_t* tile, const int16_t* x,
                          V32x16& s0, V32x16& s1) {
  const D16x32 d16;
  const hn::Rebind<uint8_t, D16x32> du8;
  const size_t n = hn::Lanes(d16);
  const auto k3 = hn::Set(d16, 3), k1 = hn::Set(d16, 1), k4 = hn::Set(d16, 4);
  for (int h = 0; h < 2; ++h) {
    for (size_t l = 0; l < 32; l += n) {
      const auto bytes = hn::PromoteTo(d16, hn::LoadU(du8, qs + 32 * h + l));
      const auto high = hm != nullptr ? hn::PromoteTo(d16, hn::LoadU(du8, hm + l)) : hn::Zero(d16);
      for (int j = 0; j < 4; ++j) {
        auto q = hn::And(hn::ShiftRightSame(bytes, 2 * j), k3);
        if (hm != nullptr) q = hn::Add(q, hn::Sub(hn::ShiftLeft<2>(hn::And(hn::ShiftRightSame(high, 4 * h + j), k1)), k4));
        const int g = 8 * h + 2 * j;
        Emit<kDot>(hn::Mul(q, GroupScales(sc[g], sc[g + 1], l)), 128 * h + 32 * j + l, tile, x, s0, s1);
      }
    }
  }
}

// The IQ4 levels (int8) of the 32 weights of one IQ4_XS sub-block: v[j] of
// the low nibble of qs[j], v[16 + j] of its high one (j < 16).
HWY_INLINE void Iq4Levels(const uint8_t* qs, int8_t* v) {
#if HWY_TARGET == HWY_SCALAR
  for (int j = 0; j < 16; ++j) {
    v[j] = kIq4nlValues[qs[j] & 15];
    v[16 + j] = kIq4nlValues[qs[j] >> 4];
  }
#else
  const hn::Full128<uint8_t> du8;
  const hn::Full128<int8_t> di8;
  const auto table = hn::LoadU(di8, kIq4nlValues);
  const auto q = hn::LoadU(du8, qs);
  hn::StoreU(hn::TableLookupBytes(table, hn::BitCast(di8, hn::And(q, hn::Set(du8, 15)))), di8, v);
  hn::StoreU(hn::TableLookupBytes(table, hn::BitCast(di8, hn::ShiftRight<4>(q))), di8, v + 16);
#endif
}

// The 6-bit scale (stored + 32) of IQ4_XS sub-block ib (of 32 weights).
HWY_INLINE int Iq4xsScale(const BlockIQ4_XS& b, int ib) {
  return ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b.scales_h >> 2 * ib) & 3) << 4);
}

// IQ4_XS: (ls − 32)·level per sub-block of 32.
template <bool kDot>
HWY_INLINE void DecodeIQ4XS(const BlockIQ4_XS& b, int16_t* tile, const int16_t* x, V32x16& s0, V32x16& s1) {
  const D16x32 d16;
  const hn::Rebind<int8_t, D16x32> di8;
  const size_t n = hn::Lanes(d16);
  HWY_ALIGN int8_t v[32];  // [32] one sub-block's levels
  for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
    Iq4Levels(b.qs + 16 * ib, v);
    const auto ls = hn::Set(d16, static_cast<int16_t>(Iq4xsScale(b, ib) - 32));
    for (size_t l = 0; l < 32; l += n) Emit<kDot>(hn::Mul(hn::PromoteTo(d16, hn::Load(di8, v + l)), ls), 32 * ib + l, tile, x, s0, s1);
  }
}

// Per format: Run<kDot>(b, tile, x, mins, s0, s1) is the decoder; the types
// with mins (kHasMins) fill mins[16], one per 16 weights, the others leave
// it untouched.
template <class Block>
struct KQuant;
template <>
struct KQuant<BlockQ4_K> {
  static constexpr bool kHasMins = true;
  template <bool kDot>
  static HWY_INLINE void Run(const BlockQ4_K& b, int16_t* tile, const int16_t* x, int32_t* mins, V32x16& s0,
                             V32x16& s1) {
    DecodeQ45<kDot>(b, nullptr, tile, x, mins, s0, s1);
  }
};
template <>
struct KQuant<BlockQ5_K> {
  static constexpr bool kHasMins = true;
  template <bool kDot>
  static HWY_INLINE void Run(const BlockQ5_K& b, int16_t* tile, const int16_t* x, int32_t* mins, V32x16& s0,
                             V32x16& s1) {
    DecodeQ45<kDot>(b, b.qh, tile, x, mins, s0, s1);
  }
};
template <>
struct KQuant<BlockQ6_K> {
  static constexpr bool kHasMins = false;
  template <bool kDot>
  static HWY_INLINE void Run(const BlockQ6_K& b, int16_t* tile, const int16_t* x, int32_t* /*mins*/, V32x16& s0,
                             V32x16& s1) {
    DecodeQ6<kDot>(b, tile, x, s0, s1);
  }
};

template <>
struct KQuant<BlockQ2_K> {
  static constexpr bool kHasMins = true;
  template <bool kDot>
  static HWY_INLINE void Run(const BlockQ2_K& b, int16_t* tile, const int16_t* x, int32_t* mins, V32x16& s0,
                             V32x16& s1) {
    int sc[16];
    for (int g = 0; g < 16; ++g) {
      sc[g] = b.scales[g] & 15;
      mins[g] = b.scales[g] >> 4;
    }
    DecodeQ23<kDot>(b.qs, nullptr, sc, tile, x, s0, s1);
  }
};
template <>
struct KQuant<BlockQ3_K> {
  static constexpr bool kHasMins = false;
  template <bool kDot>
  static HWY_INLINE void Run(const BlockQ3_K& b, int16_t* tile, const int16_t* x, int32_t* /*mins*/, V32x16& s0,
                             V32x16& s1) {
    int8_t packed[16];
    UnpackQ3KScales(b.scales, packed);
    int sc[16];
    for (int g = 0; g < 16; ++g) sc[g] = packed[g] - 32;
    DecodeQ23<kDot>(b.qs, b.hmask, sc, tile, x, s0, s1);
  }
};
template <>
struct KQuant<BlockIQ4_XS> {
  static constexpr bool kHasMins = false;
  template <bool kDot>
  static HWY_INLINE void Run(const BlockIQ4_XS& b, int16_t* tile, const int16_t* x, int32_t* /*mins*/, V32x16& s0,
                             V32x16& s1) {
    DecodeIQ4XS<kDot>(b, tile, x, s0, s1);
  }
};

// tile = the super-block's scale·code, mins its mins.
template <class Block>
HWY_INLINE void DecodeTile(const Block& b, int16_t* tile, int32_t* mins) {
  V32x16 s0 = hn::Zero(D32x16()), s1 = s0;
  KQuant<Block>::template Run<false>(b, tile, nullptr, mins, s0, s1);
}

// Σ scale·code·x over the super-block, exact, without a tile. x: [256] int16.
template <class Block>
HWY_INLINE int32_t FusedDot(const Block& b, const int16_t* x, int32_t* mins) {
  const D32x16 d32;
  V32x16 s0 = hn::Zero(d32), s1 = s0;
  KQuant<Block>::template Run<true>(b, nullptr, x, mins, s0, s1);
  return hn::GetLane(hn::SumOfLanes(d32, hn::RearrangeToOddPlusEven(s0, s1)));
}

template <class Block>
HWY_INLINE float Dmin(const Block& b) {
  if constexpr (KQuant<Block>::kHasMins) {
    return HalfToFloat(b.dmin);
  } else {
    return 0.0f;
  }
}

// acc + dw·dx·S (and − dmin·dx·M, M = Σ mins·bsums, for the types with
// mins): the f32 fold of one super-block of a row (scale dw, min scale dmin)
// against one vector (scale dx, group sums bsum16[16]) with S = sum, in this
// order on every path.
template <class Block>
HWY_INLINE float FoldSuperBlock(float dw, float dmin, float dx, int32_t sum, const int32_t* mins,
                                const int32_t* bsum16, float acc) {
  acc = std::fma(dw * dx, static_cast<float>(sum), acc);
  if constexpr (KQuant<Block>::kHasMins) {
    int32_t msum = 0;
    for (int g = 0; g < 16; ++g) msum += mins[g] * bsum16[g];
    acc = std::fma(-(dmin * dx), static_cast<float>(msum), acc);
  }
  return acc;
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include "simd/matvec_kquant_avx512-inl.h"  // AvxMatVecRows
#endif  // HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

#if HWY_TARGET == HWY_AVX2
#include "simd/matvec_kquant_avx2-inl.h"  // Avx2MatVecRows
#endif
#if KVEDGE_HWY_ARM_DOT_TARGET
#include "simd/matvec_kquant_arm-inl.h"  // ArmKQuantChunkRows
#endif

// Rows [row_begin, row_end) × nv input vectors over super-blocks
// [cb, cb + nsb) of each row; y[v·y_stride + r] carries each pair's running
// sum from chunk to chunk (written when cb == 0). One vector (MatVec): the
// fused decoder; more: decode once into the tile, then TileDot per vector
// (the same exact integer S either way).
template <class Block>
HWY_NOINLINE void KQuantChunkRows(const Block* w, size_t nsb_row, size_t cb, size_t nsb, const ActChunk* xc, size_t nv,
                                  float* y, size_t y_stride, size_t row_begin, size_t row_end) {
  HWY_ALIGN int16_t tile[kSuperBlock];  // [256] scale·code
  int32_t mins[16];                     // [group of 16] mins
  for (size_t r = row_begin; r < row_end; ++r) {
    const Block* row = w + r * nsb_row + cb;
    float acc[kVecTile];
    for (size_t v = 0; v < nv; ++v) acc[v] = cb == 0 ? 0.0f : y[v * y_stride + r];
    for (size_t s = 0; s < nsb; ++s) {
      int32_t fused = 0;
      if (nv == 1) {
        fused = FusedDot(row[s], xc[0].q + s * kSuperBlock, mins);
      } else {
        DecodeTile(row[s], tile, mins);
      }
      const float dw = HalfToFloat(row[s].d), dmin = Dmin(row[s]);
      for (size_t v = 0; v < nv; ++v) {
        const int32_t sum = nv == 1 ? fused : TileDot(tile, xc[v].q + s * kSuperBlock);
        acc[v] = FoldSuperBlock<Block>(dw, dmin, xc[v].d[s], sum, mins, xc[v].bsum16[s], acc[v]);
      }
    }
    for (size_t v = 0; v < nv; ++v) y[v * y_stride + r] = acc[v];
  }
}

template <class Block>
void KQuantRowsOf(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (n == 1) return AvxMatVecRows<Block>(m, x, y, row_begin, row_end);
#endif
#if HWY_TARGET == HWY_AVX2
  if (n == 1) return Avx2MatVecRows<Block>(m, x, y, row_begin, row_end);
#endif
  const size_t nsb_row = m.cols / kSuperBlock;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/256] super-blocks
  HWY_ALIGN ActChunk xc[kVecTile];                       // [tile vector] chunk activations
  for (size_t v0 = 0; v0 < n; v0 += kVecTile) {
    const size_t nv = std::min(kVecTile, n - v0);
    for (size_t cb = 0; cb < nsb_row; cb += kChunkSuperBlocks) {
      const size_t nsb = std::min(kChunkSuperBlocks, nsb_row - cb);
      for (size_t v = 0; v < nv; ++v) PrepareChunk(x + (v0 + v) * m.cols + cb * kSuperBlock, nsb, xc + v);
#if KVEDGE_HWY_ARM_DOT_TARGET
      if (nv == 1 && UseArmKDot()) {
        ArmKQuantChunkRows(w, nsb_row, cb, nsb, xc[0], y + v0 * m.rows, row_begin, row_end);
        continue;
      }
#endif
      KQuantChunkRows(w, nsb_row, cb, nsb, xc, nv, y + v0 * m.rows, m.rows, row_begin, row_end);
    }
  }
}

// QuantizeRowQ8_K bit for bit (QuantizeQ8K), for the other Q8_K kernels
// (matvec_kquant_interleaved.cc). n a multiple of 256.
void QuantizeQ8KT(const float* x, BlockQ8_K* out, size_t n) { QuantizeQ8K(x, out, n / kSuperBlock); }

void KQuantRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kQ2_K: return KQuantRowsOf<BlockQ2_K>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ3_K: return KQuantRowsOf<BlockQ3_K>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_K: return KQuantRowsOf<BlockQ4_K>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_K: return KQuantRowsOf<BlockQ5_K>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ6_K: return KQuantRowsOf<BlockQ6_K>(m, x, n, y, row_begin, row_end);
    case WeightType::kIQ4_XS: return KQuantRowsOf<BlockIQ4_XS>(m, x, n, y, row_begin, row_end);
    default: HWY_ABORT("%s is not a Q8_K-activation type", WeightTypeName(m.type));
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(KQuantRowsT);
HWY_EXPORT(QuantizeQ8KT);

void QuantizeRowQ8KFast(const float* x, BlockQ8_K* out, size_t n) { HWY_DYNAMIC_DISPATCH(QuantizeQ8KT)(x, out, n); }

void QuantizeRowQ8_K(const float* x, BlockQ8_K* out, size_t n) {
  for (size_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    BlockQ8_K& b = out[i];
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kSuperBlock; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      b = BlockQ8_K{};
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kSuperBlock; ++j) {
      b.qs[j] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * x[j]))));
    }
    for (int j = 0; j < kSuperBlock / 16; ++j) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) sum += b.qs[16 * j + k];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
}

void KQuantRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(KQuantRowsT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
