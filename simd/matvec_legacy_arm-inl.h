// Integer dot products of the legacy 32-weight blocks (Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL) on ARM: sdot (vdotq_s32, Armv8.2 dotprod) on the NEON
// target when the CPU has it, svdot on the SVE targets. Included once per
// target by matvec_legacy.cc after legacy_int-inl.h; the kernels exist in
// the passes where KVEDGE_HWY_ARM_DOT_TARGET (simd/arm_dotprod.h) holds.
//
// A block's 32 weights become two int8x16 code vectors (weights 0…15 and
// 16…31, the ref::QuantCode values: Q8_0 [−128, 127], Q4_0 [−8, 7], Q4_1
// [0, 15], Q5_0 [−16, 15], Q5_1 [0, 31], IQ4_NL [−127, 113]) and two sdot
// against the block's int8 activation codes give 4 exact int32 partial
// sums; then one convert and one FMA with the block scale dw·dx, as the
// int16 path (QuantTile) does with its lanes. Per (row, vector) pair the op
// sequence is the same in every tile shape, so MatVec, MatMul and any
// thread count agree bit for bit. The min term of Q4_1/Q5_1 stays with the
// caller (RunTile: MinDot).
#if defined(KVEDGE_SIMD_MATVEC_LEGACY_ARM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_MATVEC_LEGACY_ARM_INL_H_
#undef KVEDGE_SIMD_MATVEC_LEGACY_ARM_INL_H_
#else
#define KVEDGE_SIMD_MATVEC_LEGACY_ARM_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/arm_dotprod.h"
#include "simd/weight_format.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

#if KVEDGE_HWY_ARM_DOT_TARGET

// Byte k of weights [p, p + 16) of a Q5 block: the qh byte holding its fifth
// bit and that bit (weight j: byte j/8, bit j%8).
alignas(16) inline constexpr uint8_t kArmQhByte[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                       2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
alignas(16) inline constexpr uint8_t kArmQhBit[32] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                                                      1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
#endif

#if HWY_TARGET == HWY_NEON
// The dot tile runs only where the CPU has sdot; the int16 path otherwise.
HWY_INLINE bool UseArmDot() { return ArmHasDotProd(); }

// Codes of weights 0…15 (*lo) and 16…31 (*hi) of one block.
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmCodes(const BlockQ8_0& b, int8x16_t* lo, int8x16_t* hi) {
  *lo = vld1q_s8(b.qs);
  *hi = vld1q_s8(b.qs + 16);
}
// The 4-bit indices 0…15: weight j in the low nibble of byte j, j + 16 in the high one.
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmNibbles(const uint8_t* qs, uint8x16_t* lo, uint8x16_t* hi) {
  const uint8x16_t bytes = vld1q_u8(qs);
  *lo = vandq_u8(bytes, vdupq_n_u8(15));
  *hi = vshrq_n_u8(bytes, 4);
}
// 16 where weight j's fifth bit (bit j of the 4 qh bytes) is set, else 0,
// for weights 0…15 (*lo) and 16…31 (*hi).
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmFifthBits(const uint8_t* qh, uint8x16_t* lo, uint8x16_t* hi) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const uint8x16_t all = vreinterpretq_u8_u32(vdupq_n_u32(bits));
  const uint8x16_t sixteen = vdupq_n_u8(16);
  *lo = vandq_u8(vtstq_u8(vqtbl1q_u8(all, vld1q_u8(kArmQhByte)), vld1q_u8(kArmQhBit)), sixteen);
  *hi = vandq_u8(vtstq_u8(vqtbl1q_u8(all, vld1q_u8(kArmQhByte + 16)), vld1q_u8(kArmQhBit + 16)), sixteen);
}
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmCodes(const BlockQ4_0& b, int8x16_t* lo, int8x16_t* hi) {
  uint8x16_t l, h;
  ArmNibbles(b.qs, &l, &h);
  *lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(8));
  *hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(8));
}
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmCodes(const BlockQ4_1& b, int8x16_t* lo, int8x16_t* hi) {
  uint8x16_t l, h;
  ArmNibbles(b.qs, &l, &h);
  *lo = vreinterpretq_s8_u8(l);
  *hi = vreinterpretq_s8_u8(h);
}
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmCodes(const BlockQ5_0& b, int8x16_t* lo, int8x16_t* hi) {
  uint8x16_t l, h, fl, fh;
  ArmNibbles(b.qs, &l, &h);
  ArmFifthBits(b.qh, &fl, &fh);
  *lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l, fl)), vdupq_n_s8(16));
  *hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(h, fh)), vdupq_n_s8(16));
}
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmCodes(const BlockQ5_1& b, int8x16_t* lo, int8x16_t* hi) {
  uint8x16_t l, h, fl, fh;
  ArmNibbles(b.qs, &l, &h);
  ArmFifthBits(b.qh, &fl, &fh);
  *lo = vreinterpretq_s8_u8(vorrq_u8(l, fl));
  *hi = vreinterpretq_s8_u8(vorrq_u8(h, fh));
}
// IQ4_NL: the indices through the 16-byte codebook, one table lookup each.
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmCodes(const BlockIQ4_NL& b, int8x16_t* lo, int8x16_t* hi) {
  uint8x16_t l, h;
  ArmNibbles(b.qs, &l, &h);
  const int8x16_t table = vld1q_s8(kIq4nlValues);
  *lo = vqtbl1q_s8(table, l);
  *hi = vqtbl1q_s8(table, h);
}

// out[r·V + v] = Σ_b s[(r·V + v)·kChunkBlocks + b]·(row r's codes · vector
// v's codes over block b), a register tile of R rows × V vectors:
//   w[r]: [nb] blocks; xq[v]: [nb·32] int8 codes; s: [R·V][kChunkBlocks]
//   dw·dx. prefetch_ahead as QuantTile.
template <class Block, size_t R, size_t V>
KVEDGE_ATTR_DOTPROD HWY_NOINLINE void ArmDotTile(const Block* const* w, const int8_t* const* xq, const float* s,
                                                 size_t nb, size_t prefetch_ahead, float* out) {
  float32x4_t acc[R][V];
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) acc[r][v] = vdupq_n_f32(0.0f);
  }
  for (size_t b = 0; b < nb; ++b) {
    if (prefetch_ahead != 0) {
      for (size_t r = 0; r < R; ++r) hwy::Prefetch(w[r] + b + prefetch_ahead);
    }
    int8x16_t x0[V], x1[V];
    for (size_t v = 0; v < V; ++v) {
      x0[v] = vld1q_s8(xq[v] + b * kQuantBlock);
      x1[v] = vld1q_s8(xq[v] + b * kQuantBlock + 16);
    }
    for (size_t r = 0; r < R; ++r) {
      int8x16_t lo, hi;
      ArmCodes(w[r][b], &lo, &hi);
      for (size_t v = 0; v < V; ++v) {
        const int32x4_t dot = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, x0[v]), hi, x1[v]);
        acc[r][v] = vfmaq_f32(acc[r][v], vcvtq_f32_s32(dot), vdupq_n_f32(s[(r * V + v) * kChunkBlocks + b]));
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) out[r * V + v] = vaddvq_f32(acc[r][v]);
  }
}

#elif KVEDGE_HWY_ARM_DOT_TARGET
// SVE/SVE2 (every vector length): svdot on the first 16 bytes of each
// vector, the NEON kernel's layout and op sequence (wider vectors are not
// used yet). Inactive lanes are loaded as 0 activation codes, so whatever
// the weight lanes past 16 hold adds 0.
HWY_INLINE bool UseArmDot() { return true; }

HWY_INLINE svbool_t ArmPg8() { return svwhilelt_b8_u32(0, 16); }

HWY_INLINE void ArmCodes(const BlockQ8_0& b, svint8_t* lo, svint8_t* hi) {
  *lo = svld1_s8(ArmPg8(), b.qs);
  *hi = svld1_s8(ArmPg8(), b.qs + 16);
}
HWY_INLINE void ArmNibbles(const uint8_t* qs, svuint8_t* lo, svuint8_t* hi) {
  const svbool_t pg = ArmPg8();
  const svuint8_t bytes = svld1_u8(pg, qs);
  *lo = svand_n_u8_x(pg, bytes, 15);
  *hi = svlsr_n_u8_x(pg, bytes, 4);
}
// codes | 16 where the weight's fifth bit is set, weights [p, p + 16).
HWY_INLINE svuint8_t ArmWithFifthBit(svuint8_t codes, uint32_t bits, size_t p) {
  const svbool_t pg = ArmPg8();
  const svuint8_t sel = svtbl_u8(svreinterpret_u8_u32(svdup_n_u32(bits)), svld1_u8(pg, kArmQhByte + p));
  const svbool_t set = svcmpne_n_u8(pg, svand_u8_x(pg, sel, svld1_u8(pg, kArmQhBit + p)), 0);
  return svorr_n_u8_m(set, codes, 16);
}
template <class Block>
HWY_INLINE void ArmFifthCodes(const Block& b, svuint8_t* lo, svuint8_t* hi) {
  uint32_t bits;
  std::memcpy(&bits, b.qh, sizeof(bits));
  ArmNibbles(b.qs, lo, hi);
  *lo = ArmWithFifthBit(*lo, bits, 0);
  *hi = ArmWithFifthBit(*hi, bits, 16);
}
HWY_INLINE void ArmCodes(const BlockQ4_0& b, svint8_t* lo, svint8_t* hi) {
  svuint8_t l, h;
  ArmNibbles(b.qs, &l, &h);
  *lo = svsub_n_s8_x(ArmPg8(), svreinterpret_s8_u8(l), 8);
  *hi = svsub_n_s8_x(ArmPg8(), svreinterpret_s8_u8(h), 8);
}
HWY_INLINE void ArmCodes(const BlockQ4_1& b, svint8_t* lo, svint8_t* hi) {
  svuint8_t l, h;
  ArmNibbles(b.qs, &l, &h);
  *lo = svreinterpret_s8_u8(l);
  *hi = svreinterpret_s8_u8(h);
}
HWY_INLINE void ArmCodes(const BlockQ5_0& b, svint8_t* lo, svint8_t* hi) {
  svuint8_t l, h;
  ArmFifthCodes(b, &l, &h);
  *lo = svsub_n_s8_x(ArmPg8(), svreinterpret_s8_u8(l), 16);
  *hi = svsub_n_s8_x(ArmPg8(), svreinterpret_s8_u8(h), 16);
}
HWY_INLINE void ArmCodes(const BlockQ5_1& b, svint8_t* lo, svint8_t* hi) {
  svuint8_t l, h;
  ArmFifthCodes(b, &l, &h);
  *lo = svreinterpret_s8_u8(l);
  *hi = svreinterpret_s8_u8(h);
}
HWY_INLINE void ArmCodes(const BlockIQ4_NL& b, svint8_t* lo, svint8_t* hi) {
  svuint8_t l, h;
  ArmNibbles(b.qs, &l, &h);
  const svint8_t table = svld1_s8(ArmPg8(), kIq4nlValues);
  *lo = svtbl_s8(table, l);
  *hi = svtbl_s8(table, h);
}

// One (row, vector) pair of ArmDotTile: sizeless vectors form no arrays.
template <class Block>
HWY_INLINE float ArmDotPair(const Block* w, const int8_t* xq, const float* s, size_t nb, size_t prefetch_ahead) {
  const svbool_t pg8 = ArmPg8();
  const svbool_t pg32 = svwhilelt_b32_u32(0, 4);
  svfloat32_t acc = svdup_n_f32(0.0f);
  for (size_t b = 0; b < nb; ++b) {
    if (prefetch_ahead != 0) hwy::Prefetch(w + b + prefetch_ahead);
    svint8_t lo, hi;
    ArmCodes(w[b], &lo, &hi);
    const svint32_t dot = svdot_s32(svdot_s32(svdup_n_s32(0), lo, svld1_s8(pg8, xq + b * kQuantBlock)), hi,
                                    svld1_s8(pg8, xq + b * kQuantBlock + 16));
    acc = svmla_f32_m(pg32, acc, svcvt_f32_s32_x(pg32, dot), svdup_n_f32(s[b]));
  }
  return svaddv_f32(pg32, acc);
}

template <class Block, size_t R, size_t V>
HWY_NOINLINE void ArmDotTile(const Block* const* w, const int8_t* const* xq, const float* s, size_t nb,
                             size_t prefetch_ahead, float* out) {
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) {
      out[r * V + v] = ArmDotPair(w[r], xq[v], s + (r * V + v) * kChunkBlocks, nb, prefetch_ahead);
    }
  }
}
#endif

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_MATVEC_LEGACY_ARM_INL_H_
