// Decode-attention scores of int8/int4 key blocks and the value
// accumulation of int8/int4 value blocks (below, "values") on ARM with
// integer dot products: NEON sdot/udot (vdotq_laneq_s32/u32, Armv8.2
// dotprod) when the CPU has them (ArmHasDotProd(); without, the NEON target
// keeps the f32 kernels of kv_kernels.cc), svdot_lane on the SVE targets (scores there for int4 keys only).
// Included once per target by kv_kernels.cc (between its per-target
// namespace blocks, after PrepareQuery and F32FromF16Array); the kernels
// exist in the passes where KVEDGE_HWY_ARM_DOT_TARGET (simd/arm_dotprod.h)
// holds.
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
// Four 16-byte rows interleaved by byte: w->val[v] byte 4·i + j = row j's
// byte 4·v + i (for keys: rows = channels, bytes = tokens; for values the
// other way round).
HWY_INLINE void ArmZip4(uint8x16_t c0, uint8x16_t c1, uint8x16_t c2, uint8x16_t c3, uint8x16x4_t* w) {
  const uint16x8_t a = vreinterpretq_u16_u8(vzip1q_u8(c0, c1));  // bytes 0..7: (c0, c1)
  const uint16x8_t b = vreinterpretq_u16_u8(vzip2q_u8(c0, c1));  // bytes 8..15
  const uint16x8_t c = vreinterpretq_u16_u8(vzip1q_u8(c2, c3));
  const uint16x8_t d = vreinterpretq_u16_u8(vzip2q_u8(c2, c3));
  w->val[0] = vreinterpretq_u8_u16(vzip1q_u16(a, c));  // bytes 0..3: (c0, c1, c2, c3)
  w->val[1] = vreinterpretq_u8_u16(vzip2q_u16(a, c));
  w->val[2] = vreinterpretq_u8_u16(vzip1q_u16(b, d));
  w->val[3] = vreinterpretq_u8_u16(vzip2q_u16(b, d));
}

template <bool kInt8>
HWY_INLINE void ArmTransposeQuad(const uint8_t* HWY_RESTRICT block, size_t q4, uint8_t* HWY_RESTRICT u,
                                 int8_t* HWY_RESTRICT s) {
  uint8_t* HWY_RESTRICT du = u + q4 * kArmQuadBytes;
  if constexpr (kInt8) {  // channel c: 32 bytes, token t at byte t
    const uint8x16x4_t r01 = vld1q_u8_x4(block + q4 * 128);       // c0 t0..15, c0 t16..31, c1 …
    const uint8x16x4_t r23 = vld1q_u8_x4(block + q4 * 128 + 64);  // c2 …, c3 …
    uint8x16x4_t lo, hi;
    ArmZip4(r01.val[0], r01.val[2], r23.val[0], r23.val[2], &lo);
    ArmZip4(r01.val[1], r01.val[3], r23.val[1], r23.val[3], &hi);
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
    ArmZip4(r.val[0], r.val[1], r.val[2], r.val[3], &w);
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

// ---------------------------------------------------------------- values
//
// AccumulateValueBlocksMulti for int8/int4 values, D a multiple of 32,
// nq ≥ 2, with the numbers of the AVX-512 VNNI path (kv_kernels.cc,
// VnniFoldValueWeights / VnniValueBlock / AccumulateValueBlocksMultiVnni):
// per (query, block, value group j) the folded weights ws_t = w_t·scale_{t,j}
// are rounded to int16 codes iw_t with step δ = max_t |ws_t| / 32767 (round
// to nearest even, saturating); out[c] += δ·Σ_t iw_t·code_tc, one fused
// multiply-add per (block, channel) with the sum exact in int32
// (|Σ| ≤ 32767·255·32 < 2^31); the mins' share Σ_t w_t·min_{t,j} is summed
// in the same 16 f32 lanes, fused operations and reduction tree as the
// AVX-512 code and added once per call. Every float op is the same, so the
// outputs equal AVX3_DL's bit for bit (TestValueMultiMatchesIntModel). The
// dot units multiply bytes: iw = 256·h + l as for the query codes above
// (h signed, l unsigned); int8 codes enter the signed pass as code − 128
// with 128·Σ_t h_t added back.
//
// Layout: per block the codes are transposed once (shared by the queries)
// to [8 token quads][D channels][4 tokens] bytes: one 4-byte group of a dot
// instruction is channel c's codes of 4 tokens, and the weight codes of
// those 4 tokens are the indexed lane (`sdot v.4s, codes.16b, w.4b[quad]`).

constexpr size_t kArmValueQuads = kKvBlockTokens / 4;  // token quads per block
constexpr size_t kArmValueGroups = kMaxHeadDim / kValueGroup;
constexpr size_t kArmValuePass = 8;  // queries per pass over the blocks (AVX-512: kQueryGroup)
constexpr size_t kArmValueTile = 4;  // queries per pass over one block's codes

// A block's codes transposed: u[(tq·D + c)·4 + i] = code of token 4·tq + i,
// channel c; s = u − 128 (int8 only).
struct ArmValueCodes {
  alignas(16) uint8_t u[kArmValueQuads * kMaxHeadDim * 4];
  alignas(16) uint8_t s[kArmValueQuads * kMaxHeadDim * 4];
};

// A block's value scales and mins as f32, group-major: [j][t].
struct ArmValueScales {
  alignas(16) float s[kArmValueGroups][kKvBlockTokens];
  alignas(16) float m[kArmValueGroups][kKvBlockTokens];
};

// One query's weight codes of one block, per value group, split as the
// query codes: iw = 256·h + l.
struct ArmValueWeights {
  alignas(16) int8_t h[kArmValueGroups][kKvBlockTokens];
  alignas(16) uint8_t l[kArmValueGroups][kKvBlockTokens];
  int32_t sum_h[kArmValueGroups];  // Σ_t h_t
  float step[kArmValueGroups];     // δ
};

// Rows of 4 tokens at a time through ArmZip4: for each 16-byte column
// chunk, token quad tq's 4 rows become 4 vectors of 4 channels × 4 tokens.
template <bool kInt8>
HWY_INLINE void ArmTransposeValues(size_t D, const uint8_t* HWY_RESTRICT block, ArmValueCodes* HWY_RESTRICT v) {
  const size_t row = kInt8 ? D : D / 2;  // code bytes per token
  const uint8x16_t x80 = vdupq_n_u8(0x80), x0f = vdupq_n_u8(0x0F);
  for (size_t tq = 0; tq < kArmValueQuads; ++tq) {
    const uint8_t* HWY_RESTRICT r = block + 4 * tq * row;
    uint8_t* HWY_RESTRICT du = v->u + tq * D * 4;
    uint8_t* HWY_RESTRICT ds = v->s + tq * D * 4;
    for (size_t c0 = 0; c0 < row; c0 += 16) {
      uint8x16x4_t w;
      ArmZip4(vld1q_u8(r + c0), vld1q_u8(r + row + c0), vld1q_u8(r + 2 * row + c0), vld1q_u8(r + 3 * row + c0), &w);
      if constexpr (kInt8) {
        vst1q_u8_x4(du + 4 * c0, w);
        const uint8x16x4_t sw = {{veorq_u8(w.val[0], x80), veorq_u8(w.val[1], x80), veorq_u8(w.val[2], x80),
                                  veorq_u8(w.val[3], x80)}};
        vst1q_u8_x4(ds + 4 * c0, sw);
      } else {  // byte j: channel j (low nibble), j + D/2 (high)
        const uint8x16x4_t lo = {{vandq_u8(w.val[0], x0f), vandq_u8(w.val[1], x0f), vandq_u8(w.val[2], x0f),
                                  vandq_u8(w.val[3], x0f)}};
        const uint8x16x4_t hi = {{vshrq_n_u8(w.val[0], 4), vshrq_n_u8(w.val[1], 4), vshrq_n_u8(w.val[2], 4),
                                  vshrq_n_u8(w.val[3], 4)}};
        vst1q_u8_x4(du + 4 * c0, lo);
        vst1q_u8_x4(du + 4 * (c0 + D / 2), hi);
      }
    }
  }
}

// The block's f16 scales or mins [t][j] (cg per token) as f32 [j][t].
HWY_INLINE void ArmLoadValueScales(size_t cg, const uint8_t* HWY_RESTRICT f16, float (*HWY_RESTRICT dst)[kKvBlockTokens]) {
  alignas(16) float flat[kKvBlockTokens * kArmValueGroups];  // [t][j]
  F32FromF16Array(f16, kKvBlockTokens * cg, flat);
  for (size_t t = 0; t < kKvBlockTokens; t += 4) {
    if (cg == 1) {
      vst1q_f32(dst[0] + t, vld1q_f32(flat + t));
    } else if (cg == 2) {
      const float32x4x2_t x = vld2q_f32(flat + 2 * t);
      vst1q_f32(dst[0] + t, x.val[0]);
      vst1q_f32(dst[1] + t, x.val[1]);
    } else if (cg == 4) {
      const float32x4x4_t x = vld4q_f32(flat + 4 * t);
      for (size_t j = 0; j < 4; ++j) vst1q_f32(dst[j] + t, x.val[j]);
    } else {
      for (size_t i = 0; i < 4; ++i) {
        for (size_t j = 0; j < cg; ++j) dst[j][t + i] = flat[(t + i) * cg + j];
      }
    }
  }
}

// Query weights w [32] of one block to its codes per group (as
// VnniFoldValueWeights, op for op); wm[16·j + lane] += w·min in the
// AVX-512 lane order (lane l: tokens l and l + 16).
HWY_INLINE void ArmFoldValueWeights(size_t cg, const float* HWY_RESTRICT w, const ArmValueScales& vs,
                                    float* HWY_RESTRICT wm, ArmValueWeights* HWY_RESTRICT wt) {
  float32x4_t wv[8];
  for (size_t k = 0; k < 8; ++k) wv[k] = vld1q_f32(w + 4 * k);
  for (size_t j = 0; j < cg; ++j) {
    float32x4_t a[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    for (size_t k = 0; k < 8; ++k) {
      a[k] = vmulq_f32(wv[k], vld1q_f32(vs.s[j] + 4 * k));
      amax = vmaxq_f32(amax, vabsq_f32(a[k]));
    }
    for (size_t k = 0; k < 4; ++k) {  // fma(w0, m0, fma(w1, m1, acc)) of the 16-lane halves
      const float32x4_t inner = vfmaq_f32(vld1q_f32(wm + 16 * j + 4 * k), wv[k + 4], vld1q_f32(vs.m[j] + 4 * k + 16));
      vst1q_f32(wm + 16 * j + 4 * k, vfmaq_f32(inner, wv[k], vld1q_f32(vs.m[j] + 4 * k)));
    }
    const float am = vmaxvq_f32(amax);
    const bool live = am > 1e-33f;  // below, 32767/a could overflow: weights that small count as 0
    wt->step[j] = live ? am / 32767.0f : 0.0f;
    const float32x4_t inv = vdupq_n_f32(live ? 32767.0f / am : 0.0f);
    int16x8_t sum = vdupq_n_s16(0);
    for (size_t k = 0; k < 8; k += 2) {
      const int16x8_t code = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(a[k], inv))),
                                          vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(a[k + 1], inv))));
      const int8x8_t h = vshrn_n_s16(code, 8);
      vst1_s8(wt->h[j] + 4 * k, h);
      vst1_u8(wt->l[j] + 4 * k, vmovn_u16(vreinterpretq_u16_s16(code)));
      sum = vaddw_s8(sum, h);
    }
    wt->sum_h[j] = vaddlvq_s16(sum);
  }
}

// Σ of 16 lanes in _mm512_reduce_add_ps's order: halves, quarters, then
// lanes (0 + 2) + (1 + 3).
HWY_INLINE float ArmReduceAdd16(const float* HWY_RESTRICT x) {
  const float32x4_t q = vaddq_f32(vaddq_f32(vld1q_f32(x + 4), vld1q_f32(x + 12)),
                                  vaddq_f32(vld1q_f32(x), vld1q_f32(x + 8)));
  return (vgetq_lane_f32(q, 0) + vgetq_lane_f32(q, 2)) + (vgetq_lane_f32(q, 1) + vgetq_lane_f32(q, 3));
}

#if HWY_TARGET == HWY_NEON
// out[i][c0..c0+16) per 16-channel chunk: accumulator A##v holds channels
// c0 + 4v..+3 of query A (va, vb, vc, vd: queries 0..3 of the tile). Two passes
// into the same accumulators as ArmScoreBlock: Σ h·code, ×256, + Σ l·code.
#define KVEDGE_ARM_V_ZERO(A) uint32x4_t A##0 = vdupq_n_u32(0), A##1 = A##0, A##2 = A##0, A##3 = A##0;
#define KVEDGE_ARM_V_DOTS(A, W, L, S)                                         \
  A##0 = ArmDot<L, S>(A##0, k.val[0], W);                                     \
  A##1 = ArmDot<L, S>(A##1, k.val[1], W);                                     \
  A##2 = ArmDot<L, S>(A##2, k.val[2], W);                                     \
  A##3 = ArmDot<L, S>(A##3, k.val[3], W);
#define KVEDGE_ARM_V_QUAD(K, L, S)                                            \
  {                                                                           \
    const uint8x16x4_t k = vld1q_u8_x4((K) + ((4 * half + (L)) * D + c0) * 4); \
    KVEDGE_ARM_V_DOTS(va, w0, L, S)                                            \
    if constexpr (kQ > 1) { KVEDGE_ARM_V_DOTS(vb, w1, L, S) }                  \
    if constexpr (kQ > 2) { KVEDGE_ARM_V_DOTS(vc, w2, L, S) }                  \
    if constexpr (kQ > 3) { KVEDGE_ARM_V_DOTS(vd, w3, L, S) }                  \
  }
#define KVEDGE_ARM_V_W(I, FIELD) \
  (kQ > (I) ? vld1q_u8(reinterpret_cast<const uint8_t*>(wt[I].FIELD[j]) + 16 * half) : vdupq_n_u8(0))
#define KVEDGE_ARM_V_PASS(K, FIELD, S)                                        \
  for (size_t half = 0; half < 2; ++half) {                                   \
    const uint8x16_t w0 = KVEDGE_ARM_V_W(0, FIELD), w1 = KVEDGE_ARM_V_W(1, FIELD); \
    const uint8x16_t w2 = KVEDGE_ARM_V_W(2, FIELD), w3 = KVEDGE_ARM_V_W(3, FIELD); \
    KVEDGE_ARM_V_QUAD(K, 0, S)                                                \
    KVEDGE_ARM_V_QUAD(K, 1, S)                                                \
    KVEDGE_ARM_V_QUAD(K, 2, S)                                                \
    KVEDGE_ARM_V_QUAD(K, 3, S)                                                \
  }
#define KVEDGE_ARM_V_FIX(A, I)                                                \
  if constexpr (kQ > (I)) {                                                   \
    const uint32x4_t fix = vdupq_n_u32(static_cast<uint32_t>(kInt8 ? 128 * wt[I].sum_h[j] : 0)); \
    A##0 = vshlq_n_u32(vaddq_u32(A##0, fix), 8);                              \
    A##1 = vshlq_n_u32(vaddq_u32(A##1, fix), 8);                              \
    A##2 = vshlq_n_u32(vaddq_u32(A##2, fix), 8);                              \
    A##3 = vshlq_n_u32(vaddq_u32(A##3, fix), 8);                              \
  }
#define KVEDGE_ARM_V_OUT1(A, V, O, ST) \
  vst1q_f32(O + 4 * (V), vfmaq_f32(vld1q_f32(O + 4 * (V)), vcvtq_f32_s32(vreinterpretq_s32_u32(A##V)), ST));
#define KVEDGE_ARM_V_OUT(A, I)                                                \
  if constexpr (kQ > (I)) {                                                   \
    float* HWY_RESTRICT o = out + (I) * D + c0;                               \
    const float32x4_t st = vdupq_n_f32(wt[I].step[j]);                        \
    KVEDGE_ARM_V_OUT1(A, 0, o, st)                                            \
    KVEDGE_ARM_V_OUT1(A, 1, o, st)                                            \
    KVEDGE_ARM_V_OUT1(A, 2, o, st)                                            \
    KVEDGE_ARM_V_OUT1(A, 3, o, st)                                            \
  }

// out[i·D + c] += δ_ij·Σ_t iw_it·code_tc for kQ ≤ 4 queries (weights wt[i],
// output rows out + i·D) and one transposed block.
template <int kQ, bool kInt8>
KVEDGE_ATTR_DOTPROD HWY_INLINE void ArmValueBlock(size_t D, const ArmValueCodes& v,
                                                  const ArmValueWeights* HWY_RESTRICT wt, float* HWY_RESTRICT out) {
  const uint8_t* ks = kInt8 ? v.s : v.u;
  for (size_t c0 = 0; c0 < D; c0 += 16) {
    const size_t j = c0 / kValueGroup;
    KVEDGE_ARM_V_ZERO(va) KVEDGE_ARM_V_ZERO(vb) KVEDGE_ARM_V_ZERO(vc) KVEDGE_ARM_V_ZERO(vd)
    KVEDGE_ARM_V_PASS(ks, h, true)  // Σ h·code (int8: Σ h·(code − 128))
    KVEDGE_ARM_V_FIX(va, 0) KVEDGE_ARM_V_FIX(vb, 1) KVEDGE_ARM_V_FIX(vc, 2) KVEDGE_ARM_V_FIX(vd, 3)
    KVEDGE_ARM_V_PASS(v.u, l, false)  // + Σ l·code
    KVEDGE_ARM_V_OUT(va, 0) KVEDGE_ARM_V_OUT(vb, 1) KVEDGE_ARM_V_OUT(vc, 2) KVEDGE_ARM_V_OUT(vd, 3)
  }
}
#undef KVEDGE_ARM_V_ZERO
#undef KVEDGE_ARM_V_DOTS
#undef KVEDGE_ARM_V_QUAD
#undef KVEDGE_ARM_V_W
#undef KVEDGE_ARM_V_PASS
#undef KVEDGE_ARM_V_FIX
#undef KVEDGE_ARM_V_OUT1
#undef KVEDGE_ARM_V_OUT
#define KVEDGE_ARM_KV_ATTR KVEDGE_ATTR_DOTPROD

#else  // SVE, SVE2 (every vector length)
// As the NEON ArmValueBlock, channel chunks of one vector (svcntw()
// channels of one value group; a predicate at the group's end), one pass
// with separate h and l accumulators per query (named: sizeless vectors).
template <int kQ, bool kInt8>
HWY_INLINE void ArmValueBlock(size_t D, const ArmValueCodes& v, const ArmValueWeights* HWY_RESTRICT wt,
                              float* HWY_RESTRICT out) {
  const svbool_t all8 = svptrue_b8();
  const int8_t* ks = reinterpret_cast<const int8_t*>(kInt8 ? v.s : v.u);
  const uint32_t nw = static_cast<uint32_t>(svcntw());
  for (size_t j = 0; j < D / kValueGroup; ++j) {
    for (uint32_t cc = 0; cc < static_cast<uint32_t>(kValueGroup); cc += nw) {
      const size_t c0 = j * kValueGroup + cc;
      const svbool_t pg8 = svwhilelt_b8_u32(4 * cc, 4 * kValueGroup);
      const svbool_t pg32 = svwhilelt_b32_u32(cc, kValueGroup);
      svint32_t h0 = svdup_n_s32(0), h1 = h0, h2 = h0, h3 = h0;
      svuint32_t l0 = svdup_n_u32(0), l1 = l0, l2 = l0, l3 = l0;
      for (size_t half = 0; half < 2; ++half) {
#define KVEDGE_ARM_SVE_W(I)                                                                        \
  const svint8_t wh##I = kQ > (I) ? svld1rq_s8(all8, wt[I].h[j] + 16 * half) : svdup_n_s8(0);        \
  const svuint8_t wl##I = kQ > (I) ? svld1rq_u8(all8, wt[I].l[j] + 16 * half) : svdup_n_u8(0);
        KVEDGE_ARM_SVE_W(0) KVEDGE_ARM_SVE_W(1) KVEDGE_ARM_SVE_W(2) KVEDGE_ARM_SVE_W(3)
#undef KVEDGE_ARM_SVE_W
#define KVEDGE_ARM_SVE_DOT(I, L)                                                                   \
  if constexpr (kQ > (I)) {                                                                        \
    h##I = svdot_lane_s32(h##I, kv, wh##I, L);                                                     \
    l##I = svdot_lane_u32(l##I, ku, wl##I, L);                                                     \
  }
#define KVEDGE_ARM_SVE_QUAD(L)                                                                     \
  {                                                                                                \
    const size_t at = ((4 * half + (L)) * D + c0) * 4;                                             \
    const svint8_t kv = svld1_s8(pg8, ks + at);                                                    \
    const svuint8_t ku = kInt8 ? svld1_u8(pg8, v.u + at) : svreinterpret_u8_s8(kv);                \
    KVEDGE_ARM_SVE_DOT(0, L) KVEDGE_ARM_SVE_DOT(1, L) KVEDGE_ARM_SVE_DOT(2, L) KVEDGE_ARM_SVE_DOT(3, L) \
  }
        KVEDGE_ARM_SVE_QUAD(0)
        KVEDGE_ARM_SVE_QUAD(1)
        KVEDGE_ARM_SVE_QUAD(2)
        KVEDGE_ARM_SVE_QUAD(3)
#undef KVEDGE_ARM_SVE_DOT
#undef KVEDGE_ARM_SVE_QUAD
      }
      // 256·(Σ h·code [+ 128·Σ h]) + Σ l·code, wrapping int32 (exact: the sum fits).
      const auto finish = [&](svint32_t h, svuint32_t l, int i) {
        const svint32_t hk = svadd_n_s32_x(pg32, h, kInt8 ? 128 * wt[i].sum_h[j] : 0);
        const svint32_t sum = svreinterpret_s32_u32(
            svadd_u32_x(pg32, svlsl_n_u32_x(pg32, svreinterpret_u32_s32(hk), 8), l));
        float* HWY_RESTRICT o = out + i * D + c0;
        svst1_f32(pg32, o, svmla_f32_x(pg32, svld1_f32(pg32, o), svcvt_f32_s32_x(pg32, sum),
                                       svdup_n_f32(wt[i].step[j])));
      };
      finish(h0, l0, 0);
      if constexpr (kQ > 1) finish(h1, l1, 1);
      if constexpr (kQ > 2) finish(h2, l2, 2);
      if constexpr (kQ > 3) finish(h3, l3, 3);
    }
  }
}
#define KVEDGE_ARM_KV_ATTR
#endif

// AccumulateValueBlocksMulti for int8/int4 values, D a multiple of 32,
// nq ≥ 2 (the caller checks UseArmKvDot()): passes of ≤ 8 queries over the
// blocks (as AVX-512); per block the codes are transposed and the scales
// widened once, every query's weights folded, then ArmValueBlock over tiles
// of ≤ 4 queries; the mins' share added per pass.
template <bool kInt8>
KVEDGE_ARM_KV_ATTR HWY_NOINLINE void ArmAccumulateValueBlocksMulti(KvFormat f, int d, const float* HWY_RESTRICT weights,
                                                                   size_t weights_stride, size_t nq,
                                                                   const uint8_t* const* HWY_RESTRICT blocks,
                                                                   size_t n_blocks, float* HWY_RESTRICT out) {
  const size_t D = static_cast<size_t>(d);
  const size_t cg = D / kValueGroup;
  const size_t block_bytes = ValueBlockBytes(f, d);
  ArmValueCodes v;
  ArmValueScales vs;
  ArmValueWeights wt[kArmValuePass];
  alignas(16) float wm[kArmValuePass][kArmValueGroups * 16];  // [query][group][16 lanes] Σ w·min partial sums
  for (size_t p0 = 0; p0 < nq; p0 += kArmValuePass) {
    const size_t g = std::min(kArmValuePass, nq - p0);
    std::fill(&wm[0][0], &wm[0][0] + kArmValuePass * kArmValueGroups * 16, 0.0f);
    const float* HWY_RESTRICT w = weights + p0 * weights_stride;
    float* HWY_RESTRICT o = out + p0 * D;
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* HWY_RESTRICT block = blocks[b];
      PrefetchBlock(blocks, n_blocks, b, block_bytes);
      ArmLoadValueScales(cg, block + ValueBlockScalesOffset(f, d), vs.s);
      ArmLoadValueScales(cg, block + ValueBlockMinsOffset(f, d), vs.m);
      ArmTransposeValues<kInt8>(D, block, &v);
      for (size_t i = 0; i < g; ++i) {
        ArmFoldValueWeights(cg, w + i * weights_stride + b * kKvBlockTokens, vs, wm[i], &wt[i]);
      }
      for (size_t i0 = 0; i0 < g; i0 += kArmValueTile) {
        switch (std::min(kArmValueTile, g - i0)) {
          case 1: ArmValueBlock<1, kInt8>(D, v, wt + i0, o + i0 * D); break;
          case 2: ArmValueBlock<2, kInt8>(D, v, wt + i0, o + i0 * D); break;
          case 3: ArmValueBlock<3, kInt8>(D, v, wt + i0, o + i0 * D); break;
          default: ArmValueBlock<4, kInt8>(D, v, wt + i0, o + i0 * D); break;
        }
      }
    }
    // The mins' share: out_i[c] += Σ_b Σ_t w·min of c's group.
    for (size_t i = 0; i < g; ++i) {
      for (size_t j = 0; j < cg; ++j) {
        const float bias = ArmReduceAdd16(wm[i] + 16 * j);
        for (size_t c = 0; c < kValueGroup; ++c) o[i * D + j * kValueGroup + c] += bias;
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
