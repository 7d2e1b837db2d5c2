// Decode-attention scores of int8/int4 key blocks on ARM with integer dot
// products: NEON sdot/udot (vdotq_laneq_s32/u32, Armv8.2 dotprod) when the
// CPU has them (ArmHasDotProd(); without, the NEON target keeps the f32
// kernel of kv_kernels.cc), svdot_lane on the SVE targets. Included once per
// target by kv_kernels.cc (between its per-target namespace blocks, after
// PrepareQuery); the kernel exists in the passes where
// KVEDGE_HWY_ARM_DOT_TARGET (simd/arm_dotprod.h) holds.
//
// Semantics: those of the AVX-512 VNNI path (kv_kernels.h,
// MultiKernelsQuantize): per (query, block) q' = (R_b q)·s (PrepareQuery) is
// rounded to int16 codes iq_c with step δ = max_c |q'_c| / 32767 (round to
// nearest even, saturating), and the score is
//   scale·(δ·Σ_c iq_c·code_ct + Σ_c (R_b q)_c·m_c),
// with Σ_c iq_c·code_ct computed exactly in int32 (|Σ| ≤ 32767·255·256 < 2^31).
// The dot units multiply bytes, so each code is split exactly:
//   iq = 256·h + l,  h = iq >> 8 ∈ [−128, 127] (signed),  l = iq & 255 ∈ [0, 255],
//   Σ iq·k = 256·Σ h·k + Σ l·k,
// Σ l·k by udot (unsigned × unsigned: int4 and int8 codes), Σ h·k by sdot
// (signed × signed): int4 codes 0..15 are valid int8; int8 codes go in as
// k − 128 (a byte xor) and the pass adds back 128·Σ_c h_c. Every step is an
// integer identity, so the int32 per token equals the x86 vpdpwssd sum for
// the same iq (wrap-around of the intermediate adds cancels: the final sum
// fits).
//
// Layout: per block the keys are transposed once (shared by every query) to
// [D/4 channel quads][32 tokens][4 channels] bytes, so one 4-byte group of a
// dot instruction is token t's codes of 4 channels, and the query's 4 codes
// of that quad are the indexed lane of the dot (`sdot v.4s, k.16b, q.4b[j]`).
#if defined(KVEDGE_SIMD_KV_KERNELS_ARM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_KV_KERNELS_ARM_INL_H_
#undef KVEDGE_SIMD_KV_KERNELS_ARM_INL_H_
#else
#define KVEDGE_SIMD_KV_KERNELS_ARM_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <cstring>

#include "hwy/highway.h"
#include "simd/arm_dotprod.h"
#include "simd/kv_format.h"

#if HWY_ARCH_ARM_A64
#include <arm_neon.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

#if KVEDGE_HWY_ARM_DOT_TARGET

constexpr size_t kArmQuadBytes = 4 * kKvBlockTokens;  // one channel quad of a transposed block

// A block's keys as dot-product operands: [kMaxHeadDim/4][32][4] bytes.
// u: the codes (udot operand, and int4's sdot operand); s: int8's codes
// − 128 (sdot operand; unused for int4). Quads past D/4 up to the next
// multiple of 4 quads (16 channels: the query load width) are zero.
struct ArmKeyQuads {
  alignas(16) uint8_t u[kMaxHeadDim / 4 * kArmQuadBytes];
  alignas(16) int8_t s[kMaxHeadDim / 4 * kArmQuadBytes];
};

// The int16 query codes of ≤ 2 queries, split: h[i][c] = iq >> 8, l[i][c] =
// iq & 255, zero past D up to a multiple of 16. sum_h[i] = Σ_c h[i][c].
struct ArmQueryCodes {
  alignas(16) int8_t h[2][kMaxHeadDim];
  alignas(16) uint8_t l[2][kMaxHeadDim];
  int32_t sum_h[2];
  float step[2];  // δ (0: q' is below 1e-33 everywhere, scores = the min term)
  float bias[2];  // Σ_c (R_b q)_c·m_c
};

// Channels 4·q4 .. 4·q4+3 of a channel-major block, transposed to token-major
// 4-byte groups: dst[t·4 + j] = code of channel 4·q4 + j, token t.
template <bool kInt8>
HWY_INLINE void ArmTransposeQuad(const uint8_t* HWY_RESTRICT block, size_t q4, uint8_t* HWY_RESTRICT u,
                                 int8_t* HWY_RESTRICT s) {
  const auto zip4 = [](uint8x16_t c0, uint8x16_t c1, uint8x16_t c2, uint8x16_t c3, uint8x16x4_t* w) {
    const uint16x8_t a = vreinterpretq_u16_u8(vzip1q_u8(c0, c1));  // tokens 0..7: (c0, c1)
    const uint16x8_t b = vreinterpretq_u16_u8(vzip2q_u8(c0, c1));  // tokens 8..15
    const uint16x8_t c = vreinterpretq_u16_u8(vzip1q_u8(c2, c3));
    const uint16x8_t d = vreinterpretq_u16_u8(vzip2q_u8(c2, c3));
    w->val[0] = vreinterpretq_u8_u16(vzip1q_u16(a, c));  // tokens 0..3: (c0, c1, c2, c3)
    w->val[1] = vreinterpretq_u8_u16(vzip2q_u16(a, c));
    w->val[2] = vreinterpretq_u8_u16(vzip1q_u16(b, d));
    w->val[3] = vreinterpretq_u8_u16(vzip2q_u16(b, d));
  };
  uint8_t* HWY_RESTRICT du = u + q4 * kArmQuadBytes;
  if constexpr (kInt8) {  // channel c: 32 bytes, token t at byte t
    const uint8x16x4_t r01 = vld1q_u8_x4(block + q4 * 128);       // c0 t0..15, c0 t16..31, c1 …
    const uint8x16x4_t r23 = vld1q_u8_x4(block + q4 * 128 + 64);  // c2 …, c3 …
    uint8x16x4_t lo, hi;
    zip4(r01.val[0], r01.val[2], r23.val[0], r23.val[2], &lo);
    zip4(r01.val[1], r01.val[3], r23.val[1], r23.val[3], &hi);
    vst1q_u8_x4(du, lo);
    vst1q_u8_x4(du + 64, hi);
    const uint8x16_t x80 = vdupq_n_u8(0x80);
    const uint8x16x4_t slo = {{veorq_u8(lo.val[0], x80), veorq_u8(lo.val[1], x80), veorq_u8(lo.val[2], x80),
                               veorq_u8(lo.val[3], x80)}};
    const uint8x16x4_t shi = {{veorq_u8(hi.val[0], x80), veorq_u8(hi.val[1], x80), veorq_u8(hi.val[2], x80),
                               veorq_u8(hi.val[3], x80)}};
    vst1q_u8_x4(reinterpret_cast<uint8_t*>(s) + q4 * kArmQuadBytes, slo);
    vst1q_u8_x4(reinterpret_cast<uint8_t*>(s) + q4 * kArmQuadBytes + 64, shi);
  } else {  // channel c: 16 bytes, byte j = token j (low nibble) | token j + 16 (high)
    const uint8x16x4_t r = vld1q_u8_x4(block + q4 * 64);
    uint8x16x4_t w;
    zip4(r.val[0], r.val[1], r.val[2], r.val[3], &w);
    const uint8x16_t x0f = vdupq_n_u8(0x0F);
    const uint8x16x4_t lo = {{vandq_u8(w.val[0], x0f), vandq_u8(w.val[1], x0f), vandq_u8(w.val[2], x0f),
                              vandq_u8(w.val[3], x0f)}};
    const uint8x16x4_t hi = {{vshrq_n_u8(w.val[0], 4), vshrq_n_u8(w.val[1], 4), vshrq_n_u8(w.val[2], 4),
                              vshrq_n_u8(w.val[3], 4)}};
    vst1q_u8_x4(du, lo);
    vst1q_u8_x4(du + 64, hi);
  }
}

// q' (PrepareQuery's qs, [D]) to the split int16 codes of query slot i;
// returns δ. Same float ops as the AVX-512 fold: codes = round(q'·(32767/a)).
HWY_INLINE float ArmQuantizeQuery(int d, const float* HWY_RESTRICT qs, ArmQueryCodes* HWY_RESTRICT qc, int i) {
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int c = 0; c < d; c += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(qs + c)));
  const float a = vmaxvq_f32(m);
  // Below ~1e-33 32767/a would overflow; such a q' scores as 0 (error ≤ a·Σ code).
  const bool live = a > 1e-33f;
  const float32x4_t inv = vdupq_n_f32(live ? 32767.0f / a : 0.0f);
  int16x8_t sum = vdupq_n_s16(0);
  for (int c = 0; c < d; c += 8) {  // d is a multiple of 8
    const int16x8_t code = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(vld1q_f32(qs + c), inv))),
                                        vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(vld1q_f32(qs + c + 4), inv))));
    const int8x8_t h = vshrn_n_s16(code, 8);  // bits 8..15: iq >> 8
    vst1_s8(qc->h[i] + c, h);
    vst1_u8(qc->l[i] + c, vmovn_u16(vreinterpretq_u16_s16(code)));
    sum = vaddw_s8(sum, h);
  }
  qc->sum_h[i] = vaddlvq_s16(sum);
  return live ? a / 32767.0f : 0.0f;
}

#if HWY_TARGET == HWY_NEON
// Integer scores only where the CPU has sdot; the f32 kernel otherwise.
HWY_INLINE bool UseArmKvDot() { return ArmHasDotProd(); }

// acc += the 4-byte groups of k · lane J of q: sdot (kSigned) or udot; the
// int32 lanes are carried as uint32x4_t (same bits, wrapping adds).
template <int J, bool kSigned>
KVEDGE_ATTR_DOTPROD HWY_INLINE uint32x4_t ArmDot(uint32x4_t acc, uint8x16_t k, uint8x16_t q) {
  if constexpr (kSigned) {
    return vreinterpretq_u32_s32(
        vdotq_laneq_s32(vreinterpretq_s32_u32(acc), vreinterpretq_s8_u8(k), vreinterpretq_s8_u8(q), J));
  } else {
    return vdotq_laneq_u32(acc, k, q, J);
  }
}

// Named accumulators (GCC kept arrays of them in memory): a0..a7 query 0,
// b0..b7 query 1, accumulator v = tokens 4v..4v+3.
#define KVEDGE_ARM_EACH8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define KVEDGE_ARM_ZERO(V) uint32x4_t a##V = vdupq_n_u32(0), b##V = vdupq_n_u32(0);
// Quad J of a 16-channel group: 8 key vectors (32 tokens), one dot per
// accumulator and query.
#define KVEDGE_ARM_DOT_Q(A, Q, J, S)                                          \
  A##0 = ArmDot<J, S>(A##0, k0.val[0], Q);                                    \
  A##1 = ArmDot<J, S>(A##1, k0.val[1], Q);                                    \
  A##2 = ArmDot<J, S>(A##2, k0.val[2], Q);                                    \
  A##3 = ArmDot<J, S>(A##3, k0.val[3], Q);                                    \
  A##4 = ArmDot<J, S>(A##4, k1.val[0], Q);                                    \
  A##5 = ArmDot<J, S>(A##5, k1.val[1], Q);                                    \
  A##6 = ArmDot<J, S>(A##6, k1.val[2], Q);                                    \
  A##7 = ArmDot<J, S>(A##7, k1.val[3], Q);
#define KVEDGE_ARM_QUAD(J, S)                                                 \
  {                                                                           \
    const uint8x16x4_t k0 = vld1q_u8_x4(kg + (J) * kArmQuadBytes);            \
    const uint8x16x4_t k1 = vld1q_u8_x4(kg + (J) * kArmQuadBytes + 64);       \
    KVEDGE_ARM_DOT_Q(a, qa, J, S)                                             \
    if constexpr (kQ > 1) {                                                   \
      KVEDGE_ARM_DOT_Q(b, qb, J, S)                                           \
    }                                                                         \
  }
// One pass over the channels: accumulators += Σ_c code_ct·(h or l)_c.
// K: transposed codes, QA/QB: query 0/1's h or l bytes.
#define KVEDGE_ARM_PASS(K, QA, QB, S)                                         \
  for (size_t g = 0; g < groups; ++g) {                                       \
    const uint8x16_t qa = vld1q_u8((QA) + 16 * g);                            \
    const uint8x16_t qb = kQ > 1 ? vld1q_u8((QB) + 16 * g) : qa;              \
    const uint8_t* kg = (K) + 4 * g * kArmQuadBytes;                          \
    KVEDGE_ARM_QUAD(0, S)                                                     \
    KVEDGE_ARM_QUAD(1, S)                                                     \
    KVEDGE_ARM_QUAD(2, S)                                                     \
    KVEDGE_ARM_QUAD(3, S)                                                     \
  }
#define KVEDGE_ARM_FIX(V)                                                     \
  a##V = vshlq_n_u32(vaddq_u32(a##V, fix_a), 8);                              \
  if constexpr (kQ > 1) b##V = vshlq_n_u32(vaddq_u32(b##V, fix_b), 8);
#define KVEDGE_ARM_OUT(V)                                                     \
  vst1q_f32(out + 4 * (V), vfmaq_f32(bs_a, vcvtq_f32_s32(vreinterpretq_s32_u32(a##V)), st_a)); \
  if constexpr (kQ > 1) {                                                     \
    vst1q_f32(out + stride + 4 * (V), vfmaq_f32(bs_b, vcvtq_f32_s32(vreinterpretq_s32_u32(b##V)), st_b)); \
  }

// Scores of kQ ≤ 2 queries (codes in qc slots 0..kQ-1) against one block:
// out[i·stride + t] = scale·(δ_i·Σ_c iq_ic·code_ct + bias_i). Two passes
// into the same accumulators: Σ h·k, then ×256, then + Σ l·k.
template <int kQ, bool kInt8>
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmScoreBlock(size_t groups, const ArmKeyQuads& k, const ArmQueryCodes& qc,
                                                  float scale, float* HWY_RESTRICT out, size_t stride) {
  KVEDGE_ARM_EACH8(KVEDGE_ARM_ZERO)
  const uint8_t* qh0 = reinterpret_cast<const uint8_t*>(qc.h[0]);
  const uint8_t* qh1 = reinterpret_cast<const uint8_t*>(qc.h[1]);
  const uint8_t* ks = kInt8 ? reinterpret_cast<const uint8_t*>(k.s) : k.u;
  KVEDGE_ARM_PASS(ks, qh0, qh1, true)  // Σ h·k (int8: Σ h·(k − 128))
  const uint32x4_t fix_a = vdupq_n_u32(static_cast<uint32_t>(kInt8 ? 128 * qc.sum_h[0] : 0));
  const uint32x4_t fix_b = vdupq_n_u32(static_cast<uint32_t>(kInt8 ? 128 * qc.sum_h[1] : 0));
  KVEDGE_ARM_EACH8(KVEDGE_ARM_FIX)  // 256·Σ h·k
  KVEDGE_ARM_PASS(k.u, qc.l[0], qc.l[1], false)  // + Σ l·k
  const float32x4_t st_a = vdupq_n_f32(qc.step[0] * scale), bs_a = vdupq_n_f32(qc.bias[0] * scale);
  const float32x4_t st_b = vdupq_n_f32(qc.step[1] * scale), bs_b = vdupq_n_f32(qc.bias[1] * scale);
  KVEDGE_ARM_EACH8(KVEDGE_ARM_OUT)
}
#undef KVEDGE_ARM_EACH8
#undef KVEDGE_ARM_ZERO
#undef KVEDGE_ARM_DOT_Q
#undef KVEDGE_ARM_QUAD
#undef KVEDGE_ARM_PASS
#undef KVEDGE_ARM_FIX
#undef KVEDGE_ARM_OUT
#define KVEDGE_ARM_KV_ATTR KVEDGE_ATTR_DOTPROD

#else  // SVE, SVE2 (every vector length)
HWY_INLINE bool UseArmKvDot() { return true; }

// As the NEON ArmScoreBlock, token chunks of one vector (svcntw() tokens; a
// predicate past 32), per chunk one pass over the channels with separate
// accumulators for the h and l sums of each query (sizeless vectors: named
// variables, kQ ≤ 2).
template <int kQ, bool kInt8>
HWY_INLINE void ArmScoreBlock(size_t groups, const ArmKeyQuads& k, const ArmQueryCodes& qc, float scale,
                              float* HWY_RESTRICT out, size_t stride) {
  const svbool_t all8 = svptrue_b8();
  const int8_t* ks = kInt8 ? k.s : reinterpret_cast<const int8_t*>(k.u);
  for (uint32_t t0 = 0; t0 < static_cast<uint32_t>(kKvBlockTokens); t0 += static_cast<uint32_t>(svcntw())) {
    const svbool_t pg8 = svwhilelt_b8_u32(4 * t0, 4 * kKvBlockTokens);
    const svbool_t pg32 = svwhilelt_b32_u32(t0, kKvBlockTokens);
    svint32_t h0 = svdup_n_s32(0), h1 = h0;
    svuint32_t l0 = svdup_n_u32(0), l1 = l0;
    for (size_t g = 0; g < groups; ++g) {
      const svint8_t qh0 = svld1rq_s8(all8, qc.h[0] + 16 * g);
      const svuint8_t ql0 = svld1rq_u8(all8, qc.l[0] + 16 * g);
      const svint8_t qh1 = kQ > 1 ? svld1rq_s8(all8, qc.h[1] + 16 * g) : qh0;
      const svuint8_t ql1 = kQ > 1 ? svld1rq_u8(all8, qc.l[1] + 16 * g) : ql0;
      const size_t at = 4 * g * kArmQuadBytes + 4 * t0;
#define KVEDGE_ARM_SVE_QUAD(J)                                                          \
  {                                                                                     \
    const svint8_t kv = svld1_s8(pg8, ks + at + (J) * kArmQuadBytes);                   \
    const svuint8_t ku = kInt8 ? svld1_u8(pg8, k.u + at + (J) * kArmQuadBytes)          \
                               : svreinterpret_u8_s8(kv);                               \
    h0 = svdot_lane_s32(h0, kv, qh0, J);                                                \
    l0 = svdot_lane_u32(l0, ku, ql0, J);                                                \
    if constexpr (kQ > 1) {                                                             \
      h1 = svdot_lane_s32(h1, kv, qh1, J);                                              \
      l1 = svdot_lane_u32(l1, ku, ql1, J);                                              \
    }                                                                                   \
  }
      KVEDGE_ARM_SVE_QUAD(0)
      KVEDGE_ARM_SVE_QUAD(1)
      KVEDGE_ARM_SVE_QUAD(2)
      KVEDGE_ARM_SVE_QUAD(3)
#undef KVEDGE_ARM_SVE_QUAD
    }
    // 256·(Σ h·k [+ 128·Σ h]) + Σ l·k, wrapping int32 arithmetic (exact: the sum fits).
    const auto finish = [&](svint32_t h, svuint32_t l, int i) {
      const svint32_t hk = svadd_n_s32_x(pg32, h, kInt8 ? 128 * qc.sum_h[i] : 0);
      const svint32_t sum = svreinterpret_s32_u32(
          svadd_u32_x(pg32, svlsl_n_u32_x(pg32, svreinterpret_u32_s32(hk), 8), l));
      const svfloat32_t r = svmla_f32_x(pg32, svdup_n_f32(qc.bias[i] * scale), svcvt_f32_s32_x(pg32, sum),
                                        svdup_n_f32(qc.step[i] * scale));
      svst1_f32(pg32, out + i * stride + t0, r);
    };
    finish(h0, l0, 0);
    if constexpr (kQ > 1) finish(h1, l1, 1);
  }
}
#define KVEDGE_ARM_KV_ATTR
#endif

// ScoreKeyBlocksMulti for int8/int4 keys, nq ≥ 2 (the caller checks
// UseArmKvDot()): per block the keys are transposed once and their scales
// and mins widened once, then queries go in pairs (an odd last one alone):
// PrepareQuery's q' and min term, ArmQuantizeQuery's codes, ArmScoreBlock.
template <bool kInt8>
KVEDGE_ARM_KV_ATTR HWY_NOINLINE void ArmScoreKeyBlocksMulti(KvFormat f, int d, int rope_dim,
                                                            const float* HWY_RESTRICT q, size_t nq,
                                                            const float* HWY_RESTRICT rot,
                                                            const uint8_t* const* HWY_RESTRICT blocks,
                                                            size_t n_blocks, float scale, float* HWY_RESTRICT scores,
                                                            size_t stride) {
  const size_t half = static_cast<size_t>(rope_dim) / 2;
  const size_t quads = static_cast<size_t>(d) / 4;
  const size_t groups = (quads + 3) / 4;  // 16-channel groups (query load width)
  const size_t block_bytes = KeyBlockBytes(f, d);
  ArmKeyQuads k;
  ArmQueryCodes qc = {};  // zero past D (d % 16 = 8), never written
  KeyFoldF32 kf;
  HWY_ALIGN float qs[kMaxHeadDim];  // [D] q' of the query being quantized
  // Padding channels (d % 16 = 8): zero key codes too, written once.
  std::memset(k.u + quads * kArmQuadBytes, 0, (4 * groups - quads) * kArmQuadBytes);
  std::memset(k.s + quads * kArmQuadBytes, 0, (4 * groups - quads) * kArmQuadBytes);
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* HWY_RESTRICT block = blocks[b];
    PrefetchBlock(blocks, n_blocks, b, block_bytes);
    LoadKeyFold(f, d, half, block, &kf);
    for (size_t q4 = 0; q4 < quads; ++q4) ArmTransposeQuad<kInt8>(block, q4, k.u, k.s);
    for (size_t q0 = 0; q0 < nq; q0 += 2) {
      const int g = nq - q0 >= 2 ? 2 : 1;
      for (int i = 0; i < g; ++i) {
        qc.bias[i] = PrepareQuery(d, half, q + (q0 + i) * d, rot + b * rope_dim, &kf, qs);
        qc.step[i] = ArmQuantizeQuery(d, qs, &qc, i);
      }
      float* out = scores + q0 * stride + b * kKvBlockTokens;
      if (g == 2) {
        ArmScoreBlock<2, kInt8>(groups, k, qc, scale, out, stride);
      } else {
        ArmScoreBlock<1, kInt8>(groups, k, qc, scale, out, stride);
      }
    }
  }
}
#undef KVEDGE_ARM_KV_ATTR

#endif  // KVEDGE_HWY_ARM_DOT_TARGET

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_KV_KERNELS_ARM_INL_H_
