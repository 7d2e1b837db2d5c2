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
// path (AvxMatVecRows: unwidened code bytes, four rows per pass, the same
// folds lane by lane), and on AVX2 matvec_kquant_avx2-inl.h's (eight rows).
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

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// ------------------------------ MatVec on AVX-512 (BW; VNNI on AVX3_DL)
// One super-block at a time in the GGUF rows layout, 64 weights per zmm as
// unsigned bytes (Q4_K 0…15, Q5_K 0…31, Q6_K q + 32 = 0…63) without
// widening: vpmaddubsw against the int8 activation codes gives int16 pair
// sums (≤ 2·63·127, no saturation), vpdpwssd (AVX3: vpmaddwd + add) weights
// each pair by its sub-block scale into int32 lanes, and one horizontal sum
// per super-block gives S (and M, from the Q8_K bsums in one vpmaddwd).
// Raw intrinsics: Highway 1.0.3 has no u8×i8 or i16 pair-sum op.
// The activation codes are stored in the weights' byte order (PrepareAvxChunk), so
// no weight byte is moved: a Q4_K/Q5_K zmm of 64 code bytes holds sub-blocks
// 0 and 2 in its low nibbles and 1 and 3 in its high ones (4…7 likewise).
#if HWY_TARGET == HWY_AVX3_DL
#define KVEDGE_ATTR_KQ KVEDGE_ATTR_VNNI512
// acc + Σ of each int32 lane's two int16 products p·sc.
KVEDGE_ATTR_KQ HWY_INLINE __m512i AddScaledPairs(__m512i acc, __m512i p, __m512i sc) {
  return _mm512_dpwssd_epi32(acc, p, sc);
}
#else
#define KVEDGE_ATTR_KQ
HWY_INLINE __m512i AddScaledPairs(__m512i acc, __m512i p, __m512i sc) {
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
}
#endif

template <class Block>
constexpr bool kIsQ23 = std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K>;
template <class Block>
constexpr bool kIsQ45 = std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K>;

// The activations in the byte order of a super-block's code vectors: slot i
// (16 bytes) of the reordered activations holds activations
// [16·order[i], +16). Q4_K/Q5_K: a zmm of 64 code bytes holds sub-blocks
// (of 32) 0 and 2 in its low nibbles and 1 and 3 in its high ones (4…7
// likewise); Q2_K/Q3_K: bit pair j of the 64 qs bytes holds weights 32j…
// and 128 + 32j…; IQ4_XS: the low nibbles of 4 sub-blocks' 16 bytes hold
// their first 16 weights, the high nibbles their last; Q6_K: ggml's order.
template <class Block>
constexpr std::array<uint8_t, 16> AvxOrder() {
  if constexpr (kIsQ45<Block>) {
    return {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
  } else if constexpr (kIsQ23<Block>) {
    return {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
  } else if constexpr (std::is_same_v<Block, BlockIQ4_XS>) {
    return {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
  } else {
    return {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  }
}
// Weights per sub-block scale.
template <class Block>
constexpr int kScaleGroup = kIsQ45<Block> || std::is_same_v<Block, BlockIQ4_XS> ? 32 : 16;
// Q6_K (5) and Q3_K (2) sum unsigned codes q + 2^shift: the caller takes
// S − (M << shift), M = Σ sc·bsum; −1: signed codes or mins (no offset).
template <class Block>
constexpr int kOffsetShift = std::is_same_v<Block, BlockQ6_K> ? 5 : std::is_same_v<Block, BlockQ3_K> ? 2 : -1;

// One input vector's Q8_K activations over a chunk, qs in the weight
// format's byte order (AvxOrder).
template <class Block>
HWY_NOINLINE void PrepareAvxChunk(const float* x, size_t nsb, BlockQ8_K* c) {
  QuantizeQ8K(x, c, nsb);
  if constexpr (!std::is_same_v<Block, BlockQ6_K>) {
    constexpr std::array<uint8_t, 16> order = AvxOrder<Block>();
    for (size_t s = 0; s < nsb; ++s) {
      int8_t q[kSuperBlock];
      std::memcpy(q, c[s].qs, sizeof(q));
      for (int i = 0; i < 16; ++i) std::memcpy(c[s].qs + 16 * i, q + 16 * order[i], 16);
    }
  }
}

// Index vectors for vpermw, built once per call.
struct AvxIndex {
  __m512i scale[4];  // int16 lane → its sub-block's scale lane, per code vector
  __m256i mins;      // Q4_K/Q5_K: lane i (a bsums of 16) → mins lane 8 + i/2
};

template <class Block>
KVEDGE_ATTR_KQ HWY_INLINE AvxIndex MakeAvxIndex() {
  HWY_ALIGN int16_t idx[4][32];
  HWY_ALIGN int16_t mins[16];
  constexpr std::array<uint8_t, 16> order = AvxOrder<Block>();
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 32; ++i) {  // int16 lane i of code vector k: activation 16·order[4k + i/8] + 2i % 16
      idx[k][i] = static_cast<int16_t>((16 * order[4 * k + i / 8] + 2 * i % 16) / kScaleGroup<Block>);
    }
  }
  for (int i = 0; i < 16; ++i) mins[i] = static_cast<int16_t>(8 + i / 2);
  AvxIndex out;
  for (int k = 0; k < 4; ++k) out.scale[k] = _mm512_load_si512(idx[k]);
  out.mins = _mm256_load_si256(reinterpret_cast<const __m256i*>(mins));
  return out;
}

// The 8 scales and 8 mins of a Q4_K/Q5_K super-block as int16 lanes
// [sc0 … sc7, m0 … m7]: UnpackScalesMins on 32-bit lanes. Reads 16 bytes at
// packed (the 12 scale bytes and 4 bytes of the block's codes).
KVEDGE_ATTR_KQ HWY_INLINE __m256i ScalesMins16(const uint8_t* packed) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));  // [u0 u1 u2 ·]
  const __m128i a = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0x98), _mm_set_epi32(4, 0, 0, 0)),
                                  _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));  // [u0 u2 u1 u2]
  const __m128i b = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, 0x50), 2),
                                  _mm_set_epi32(0x30303030, 0, 0x30303030, 0));  // [u0 u0 u1 u1]
  return _mm256_cvtepu8_epi16(_mm_or_si128(a, b));
}

// One super-block's products before the horizontal sums: S = Σ of s's 16
// lanes, M = Σ of m's 8.
struct RawSums {
  __m512i s;
  __m256i m;
};

// Q4_K (kQ5 false) or Q5_K against activations a: S = Σ sc·q·x, M = Σ min·bsum.
template <bool kQ5>
KVEDGE_ATTR_KQ HWY_INLINE RawSums SumsQ45(const uint8_t* packed, const uint8_t* qh, const uint8_t* qs,
                                          const BlockQ8_K& a, const AvxIndex& idx) {
  const __m256i sc16 = ScalesMins16(packed);
  const __m512i scz = _mm512_castsi256_si512(sc16);
  const __m512i k15 = _mm512_set1_epi8(15);
  const __m512i l0 = _mm512_loadu_si512(qs), l1 = _mm512_loadu_si512(qs + 64);
  __m512i w[4] = {_mm512_and_si512(l0, k15), _mm512_and_si512(_mm512_srli_epi16(l0, 4), k15),
                  _mm512_and_si512(l1, k15), _mm512_and_si512(_mm512_srli_epi16(l1, 4), k15)};
  if constexpr (kQ5) {
    // Bit 2c (low nibbles) or 2c+1 (high) of qh[l] is the fifth bit of
    // weight 32c + l; vector k's 256-bit halves take bits kLowBit[k] and
    // kLowBit[k] + 2.
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)));
    const __m512i k16 = _mm512_set1_epi8(16);
    constexpr int kLowBit[4] = {0, 1, 4, 5};
    for (int k = 0; k < 4; ++k) {
      const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << kLowBit[k])),
                                              _mm256_set1_epi8(static_cast<char>(1 << (kLowBit[k] + 2))), 1);
      w[k] = _mm512_mask_add_epi8(w[k], _mm512_test_epi8_mask(h, bits), w[k], k16);
    }
  }
  // Two accumulators halve the vpdpwssd latency chain.
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int k = 0; k < 4; ++k) {
    const __m512i p = _mm512_maddubs_epi16(w[k], _mm512_loadu_si512(a.qs + 64 * k));
    acc[k & 1] = AddScaledPairs(acc[k & 1], p, _mm512_permutexvar_epi16(idx.scale[k], scz));
  }
  const __m256i mins = _mm256_permutexvar_epi16(idx.mins, sc16);
  return {_mm512_add_epi32(acc[0], acc[1]),
          _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)))};
}

// Q6_K against activations a: S = Σ sc·q·x over the unsigned codes q =
// (q − 32) + 32, M = Σ sc·bsum (the caller takes S − 32·M).
KVEDGE_ATTR_KQ HWY_INLINE RawSums SumsQ6(const BlockQ6_K& b, const BlockQ8_K& a, const AvxIndex& idx) {
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m512i scz = _mm512_castsi256_si512(sc16);
  const __m512i k15 = _mm512_set1_epi8(15), k48 = _mm512_set1_epi8(0x30);
  // qh bits 2c, 2c+1 of byte l are the top bits of weight 32c + l (of the
  // half): low nibbles (c = 0, 1) shift them up by 4 or 2, high nibbles
  // (c = 2, 3) down by 0 or 2, per 256-bit half; 16-bit shifts are exact
  // under the 0x30 mask.
  const __m512i up = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i down = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int half = 0; half < 2; ++half) {
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * half);
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half)));
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, k15), _mm512_and_si512(_mm512_sllv_epi16(h, up), k48));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), k15),
                                       _mm512_and_si512(_mm512_srlv_epi16(h, down), k48));
    const __m512i p0 = _mm512_maddubs_epi16(lo, _mm512_loadu_si512(a.qs + 128 * half));
    const __m512i p1 = _mm512_maddubs_epi16(hi, _mm512_loadu_si512(a.qs + 128 * half + 64));
    acc[0] = AddScaledPairs(acc[0], p0, _mm512_permutexvar_epi16(idx.scale[2 * half], scz));
    acc[1] = AddScaledPairs(acc[1], p1, _mm512_permutexvar_epi16(idx.scale[2 * half + 1], scz));
  }
  return {_mm512_add_epi32(acc[0], acc[1]),
          _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)))};
}

// The 16 scales − 32 of a Q3_K super-block as int16 lanes (UnpackQ3KScales
// on 16-bit lanes). p: 16 bytes, the 12 packed scales at p + 2 (reading
// from the codes' last two bytes keeps the load inside the block).
KVEDGE_ATTR_KQ HWY_INLINE __m256i Q3Scales16(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  // Scale g: low 4 bits from byte g % 8 (>> 4 when g ≥ 8), high 2 bits from
  // byte 8 + g % 4 (>> 2·(g / 4)).
  const __m256i lo_at = _mm256_setr_epi16(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9);
  const __m256i hi_at = _mm256_setr_epi16(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13);
  const __m256i lo_shift = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
  const __m256i hi_shift = _mm256_setr_epi16(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
  const __m256i lo = _mm256_and_si256(_mm256_srlv_epi16(_mm256_permutexvar_epi16(lo_at, v), lo_shift),
                                      _mm256_set1_epi16(15));
  const __m256i hi = _mm256_and_si256(_mm256_srlv_epi16(_mm256_permutexvar_epi16(hi_at, v), hi_shift),
                                      _mm256_set1_epi16(3));
  return _mm256_sub_epi16(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi16(32));
}

// Q2_K (kQ3 false) or Q3_K against activations a, a scale per 16 weights:
// S = Σ sc·u·x over the unsigned codes u (Q2_K: q; Q3_K: q + 4 = low +
// 4·high), M = Σ m·bsum with m the mins (Q2_K) or the scales (Q3_K: the
// caller takes S − 4·M).
template <bool kQ3, class Block>
KVEDGE_ATTR_KQ HWY_INLINE RawSums SumsQ23(const Block& b, const BlockQ8_K& a, const AvxIndex& idx) {
  __m256i sc, m;
  if constexpr (kQ3) {
    sc = Q3Scales16(b.qs + 62);
    m = sc;
  } else {
    const __m256i packed = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    sc = _mm256_and_si256(packed, _mm256_set1_epi16(15));
    m = _mm256_srli_epi16(packed, 4);
  }
  const __m512i scz = _mm512_castsi256_si512(sc);
  const __m512i q = _mm512_loadu_si512(b.qs), k3 = _mm512_set1_epi8(3);
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int j = 0; j < 4; ++j) {
    __m512i w = _mm512_and_si512(_mm512_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), k3);
    if constexpr (kQ3) {
      // Bit j (low 256 bits: weights 32j + l) or 4 + j (high: 128 + 32j + l)
      // of hmask[l] adds 4.
      const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
      const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << j)),
                                              _mm256_set1_epi8(static_cast<char>(1 << (4 + j))), 1);
      w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(h, bits), w, _mm512_set1_epi8(4));
    }
    const __m512i p = _mm512_maddubs_epi16(w, _mm512_loadu_si512(a.qs + 64 * j));
    acc[j & 1] = AddScaledPairs(acc[j & 1], p, _mm512_permutexvar_epi16(idx.scale[j], scz));
  }
  return {_mm512_add_epi32(acc[0], acc[1]),
          _mm256_madd_epi16(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)))};
}

// IQ4_XS against activations a: S = Σ (ls − 32)·level·x. The levels are
// signed (vpshufb from the codebook), so vpmaddubsw takes |level| against x
// negated where the level is (|level·x| ≤ 127², a pair ≤ 32258: no
// saturation; x ≥ −127, so −x fits).
KVEDGE_ATTR_KQ HWY_INLINE RawSums SumsIQ4XS(const BlockIQ4_XS& b, const BlockQ8_K& a, const AvxIndex& idx) {
  const __m128i head = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&b));  // d, scales_h, scales_l[4]
  const __m128i lo = _mm_and_si128(
      _mm_srlv_epi16(_mm_shuffle_epi8(head, _mm_setr_epi8(4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1)),
                     _mm_setr_epi16(0, 4, 0, 4, 0, 4, 0, 4)),
      _mm_set1_epi16(15));
  const __m128i hi = _mm_and_si128(
      _mm_srlv_epi16(_mm_shuffle_epi8(head, _mm_setr_epi8(2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3)),
                     _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm_set1_epi16(3));
  const __m512i scz =
      _mm512_castsi128_si512(_mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32)));
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m512i k15 = _mm512_set1_epi8(15);
  const __m512i q0 = _mm512_loadu_si512(b.qs), q1 = _mm512_loadu_si512(b.qs + 64);
  const __m512i codes[4] = {_mm512_and_si512(q0, k15), _mm512_and_si512(_mm512_srli_epi16(q0, 4), k15),
                            _mm512_and_si512(q1, k15), _mm512_and_si512(_mm512_srli_epi16(q1, 4), k15)};
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_shuffle_epi8(table, codes[k]);
    const __m512i x = _mm512_loadu_si512(a.qs + 64 * k);
    const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(v), _mm512_setzero_si512(), x);
    const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(v), sx);
    acc[k & 1] = AddScaledPairs(acc[k & 1], p, _mm512_permutexvar_epi16(idx.scale[k], scz));
  }
  return {_mm512_add_epi32(acc[0], acc[1]), _mm256_setzero_si256()};
}

template <class Block>
KVEDGE_ATTR_KQ HWY_INLINE RawSums AvxSums(const Block& b, const BlockQ8_K& a, const AvxIndex& idx) {
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    return SumsQ6(b, a, idx);
  } else if constexpr (kIsQ23<Block>) {
    return SumsQ23<std::is_same_v<Block, BlockQ3_K>>(b, a, idx);
  } else if constexpr (std::is_same_v<Block, BlockIQ4_XS>) {
    return SumsIQ4XS(b, a, idx);
  } else if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    return SumsQ45<true>(b.scales, b.qh, b.qs, a, idx);
  } else {
    return SumsQ45<false>(b.scales, nullptr, b.qs, a, idx);
  }
}

// Lane i = Σ of v[i]'s 8 lanes (a transposed horizontal sum of 4 vectors).
KVEDGE_ATTR_KQ HWY_INLINE __m128i Sum8x4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
}
KVEDGE_ATTR_KQ HWY_INLINE __m256i Fold16(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// y[r] for rows [row_begin, row_end) over super-blocks [cb, cb + nsb),
// continuing from y when cb > 0. Four rows per pass, one f32 lane each: the
// four rows' S (and M) of a super-block come out of one transposed
// horizontal sum, and each lane runs KQuantChunkRows' scalar folds
// acc = fma(dw·dx, S, acc), acc = fma(−(dmin·dx), M, acc) as vector FMAs
// (the f16 scales converted by F16C, exact as HalfToFloat). A last pass of
// fewer rows repeats its last row in the spare lanes and stores only its own.
template <class Block>
KVEDGE_ATTR_KQ HWY_NOINLINE void AvxChunkRows(const Block* w, size_t nsb_row, size_t cb, size_t nsb,
                                              const BlockQ8_K* xc, float* y, size_t row_begin, size_t row_end) {
  constexpr size_t kRowsPerPass = 4;
  const AvxIndex idx = MakeAvxIndex<Block>();
  const __m256i deinterleave = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (size_t r = row_begin; r < row_end; r += kRowsPerPass) {
    const size_t valid = std::min(kRowsPerPass, row_end - r);
    const __mmask8 mask = static_cast<__mmask8>((1u << valid) - 1);
    const Block* row[kRowsPerPass];
    for (size_t i = 0; i < kRowsPerPass; ++i) row[i] = w + (r + std::min(i, valid - 1)) * nsb_row + cb;
    __m128 acc = cb == 0 ? _mm_setzero_ps() : _mm_maskz_loadu_ps(mask, y + r);
    // Software prefetch of the next pass's rows (kRowsPerPass·nsb_row
    // super-blocks ahead), this step's share of them: four row streams left
    // the hardware prefetcher behind (Q4_K from DRAM, CPU-time GB/s:
    // 13.6 → 18.5, loaded machine).
    const char* ahead = r + 2 * kRowsPerPass <= row_end
                            ? reinterpret_cast<const char*>(w + (r + kRowsPerPass) * nsb_row + cb)
                            : nullptr;
    for (size_t s = 0; s < nsb; ++s) {
      if (ahead != nullptr) {
        for (size_t i = 0; i < kRowsPerPass; ++i) {
          const char* p = ahead + (i * nsb_row + s) * sizeof(Block);
          for (size_t o = 0; o < sizeof(Block); o += 64) hwy::Prefetch(p + o);
        }
      }
      RawSums raw[kRowsPerPass];
      for (size_t i = 0; i < kRowsPerPass; ++i) raw[i] = AvxSums(row[i][s], xc[s], idx);
      __m128i sums = Sum8x4(Fold16(raw[0].s), Fold16(raw[1].s), Fold16(raw[2].s), Fold16(raw[3].s));
      const __m128 dx = _mm_set1_ps(xc[s].d);
      if constexpr (KQuant<Block>::kHasMins) {
        const __m128i mins = Sum8x4(raw[0].m, raw[1].m, raw[2].m, raw[3].m);
        uint32_t bits[kRowsPerPass];  // [row] d | dmin << 16
        for (size_t i = 0; i < kRowsPerPass; ++i) std::memcpy(bits + i, &row[i][s].d, sizeof(bits[i]));
        const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits));
        const __m256 scales = _mm256_permutexvar_ps(deinterleave, _mm256_cvtph_ps(halves));  // [d × 4, dmin × 4]
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm256_castps256_ps128(scales), dx), _mm_cvtepi32_ps(sums), acc);
        acc = _mm_fnmadd_ps(_mm_mul_ps(_mm256_extractf128_ps(scales, 1), dx), _mm_cvtepi32_ps(mins), acc);
      } else {
        if constexpr (kOffsetShift<Block> >= 0) {
          const __m128i mins = Sum8x4(raw[0].m, raw[1].m, raw[2].m, raw[3].m);
          sums = _mm_sub_epi32(sums, _mm_slli_epi32(mins, kOffsetShift<Block>));
        }
        uint16_t d[kRowsPerPass];
        for (size_t i = 0; i < kRowsPerPass; ++i) d[i] = row[i][s].d;
        uint64_t packed;
        std::memcpy(&packed, d, sizeof(packed));
        const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(packed)));
        acc = _mm_fmadd_ps(_mm_mul_ps(dw, dx), _mm_cvtepi32_ps(sums), acc);
      }
    }
    _mm_mask_storeu_ps(y + r, mask, acc);
  }
}

template <class Block>
void AvxMatVecRows(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  const size_t nsb_row = m.cols / kSuperBlock;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/256] super-blocks
  HWY_ALIGN BlockQ8_K xc[kChunkSuperBlocks];             // the chunk's activations, PrepareAvxChunk order
  for (size_t cb = 0; cb < nsb_row; cb += kChunkSuperBlocks) {
    const size_t nsb = std::min(kChunkSuperBlocks, nsb_row - cb);
    PrepareAvxChunk<Block>(x + cb * kSuperBlock, nsb, xc);
    AvxChunkRows(w, nsb_row, cb, nsb, xc, y, row_begin, row_end);
  }
}
#undef KVEDGE_ATTR_KQ
#endif  // HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

#if HWY_TARGET == HWY_AVX2
#include "simd/matvec_kquant_avx2-inl.h"  // Avx2MatVecRows
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
        const float dx = xc[v].d[s];
        const int32_t sum = nv == 1 ? fused : TileDot(tile, xc[v].q + s * kSuperBlock);
        acc[v] = std::fma(dw * dx, static_cast<float>(sum), acc[v]);
        if constexpr (KQuant<Block>::kHasMins) {
          int32_t msum = 0;
          for (int g = 0; g < 16; ++g) msum += mins[g] * xc[v].bsum16[s][g];
          acc[v] = std::fma(-(dmin * dx), static_cast<float>(msum), acc[v]);
        }
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
      KQuantChunkRows(w, nsb_row, cb, nsb, xc, nv, y + v0 * m.rows, m.rows, row_begin, row_end);
    }
  }
}

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
