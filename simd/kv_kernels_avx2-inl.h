// Decode-attention scores of int8/int4 key blocks and value accumulation of
// int8/int4 value blocks on AVX2 with integer dot products on int16-widened
// codes: vpmaddwd + vpaddd, or one AVX-VNNI vpdpwssd where the CPU has it
// (kVnni: AvxVnniEnabled(), platform/target_report.h). Included
// once per target by kv_kernels.cc (between its per-target namespace blocks,
// after the AVX3_DL kernels); the kernel exists in the HWY_AVX2 pass only.
//
// Semantics: those of the AVX-512 VNNI path (kv_kernels.h,
// MultiKernelsQuantize), bit for bit: per (query, block)
//   r = R_b q            (r0 = fma(a, c, −(b·s)), r1 = fma(a, s, b·c) per pair),
//   q' = r·s_key,        δ = max_c |q'_c| / 32767 (0 below 1e-33),
//   iq = round_even(q'·(32767/a)) saturated to int16,
//   bias = Σ_c r_c·m_c   (the AVX-512 fold's 16-lane partial sums and tree),
//   score_t = fma(float(Σ_c iq_c·code_ct), δ·scale, bias·scale),
// with Σ_c iq_c·code_ct exact in int32 (|Σ| ≤ 32767·255·256 < 2^31): vpmaddwd
// multiplies token t's codes of a channel pair (two int16 words of int32 lane
// t) with the pair's two query codes and adds both products, exactly as
// vpdpwssd does before its accumulate.
//
// Why not vpmaddubsw (bytes): an int16 query split into two bytes
// (the ARM sdot/udot route) needs two byte products per code, so 32 byte
// multiply-adds per instruction give 16 int16-query ones, as vpmaddwd does,
// and the int16 pair sums then need a widening step vpmaddwd does not (and
// int8 codes × an unsigned low byte overflow int16). An int8 query is
// inexact (docs/performance.md, "Attention at depth").
#if defined(KVEDGE_SIMD_KV_KERNELS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_KV_KERNELS_AVX2_INL_H_
#undef KVEDGE_SIMD_KV_KERNELS_AVX2_INL_H_
#else
#define KVEDGE_SIMD_KV_KERNELS_AVX2_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include <algorithm>

#include "hwy/highway.h"
#include "simd/kv_format.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2

constexpr size_t kAvx2Pass = 8;                    // queries folded per pass (a GQA group)
constexpr size_t kAvx2Pairs = kMaxHeadDim / 2;     // channel pairs, at most
constexpr int kAvx2Tokens = kKvBlockTokens;

// A pass's queries split into even and odd channels (rotation pairs), and
// one block's rotation, key scales and mins in the same pair order, zero
// past D/2 up to a multiple of 8 pairs (angles: cos 1, sin 0 past rope_dim/2,
// the unrotated tail, as the AVX-512 fold's masked loads).
struct Avx2KeyFold {
  alignas(32) float qe[kAvx2Pass][kAvx2Pairs];  // [query][pair] q[2i]
  alignas(32) float qo[kAvx2Pass][kAvx2Pairs];  // [query][pair] q[2i+1]
  alignas(32) float c[kAvx2Pairs], s[kAvx2Pairs];    // [pair] the block's cos, sin
  alignas(32) float s0[kAvx2Pairs], s1[kAvx2Pairs];  // [pair] key scales of channels 2i, 2i+1
  alignas(32) float m0[kAvx2Pairs], m1[kAvx2Pairs];  // [pair] key mins
  alignas(32) float pe[kAvx2Pass][kAvx2Pairs];       // [query][pair] q' of the even channels
  alignas(32) float po[kAvx2Pass][kAvx2Pairs];       // [query][pair] q' of the odd channels
  alignas(32) int32_t iq[kAvx2Pass][kAvx2Pairs];     // [query][pair] the pair's two int16 q' codes
  alignas(32) float step[kAvx2Pass];                 // [query] δ
  alignas(32) float bias[kAvx2Pass];                 // [query] Σ_c (R q)_c·m_c
};

// 16 f16 of a channel-pair array (8 pairs) → even / odd channels as f32, in
// pair order; `last8`: only 8 f16 remain (pairs 4..7 zero: the padding).
HWY_INLINE void Avx2SplitF16Pairs(const uint8_t* HWY_RESTRICT p, bool last8, float* HWY_RESTRICT even,
                                  float* HWY_RESTRICT odd) {
  const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256 b = last8 ? _mm256_setzero_ps()
                         : _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  // shufps per 128-bit lane gives pairs (0 1 4 5 | 2 3 6 7); vpermq 0xD8 restores the order.
  const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  _mm256_store_ps(even, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
  _mm256_store_ps(odd, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
}

// The block's part of the fold, shared by the pass's queries.
HWY_INLINE void Avx2LoadBlockFold(KvFormat f, int d, size_t rope_half, const uint8_t* HWY_RESTRICT block,
                                  const float* HWY_RESTRICT angles, Avx2KeyFold* HWY_RESTRICT k) {
  const size_t np = static_cast<size_t>(d) / 2;
  const uint8_t* scales = block + KeyBlockScalesOffset(f, d);  // f16 [D]
  const uint8_t* mins = block + KeyBlockMinsOffset(f, d);
  for (size_t i0 = 0; i0 < np; i0 += 8) {
    const bool last8 = np - i0 < 8;  // np is a multiple of 4
    Avx2SplitF16Pairs(scales + 4 * i0, last8, k->s0 + i0, k->s1 + i0);
    Avx2SplitF16Pairs(mins + 4 * i0, last8, k->m0 + i0, k->m1 + i0);
  }
  size_t i = 0;
  for (; i + 8 <= rope_half; i += 8) {
    _mm256_store_ps(k->c + i, _mm256_loadu_ps(angles + i));
    _mm256_store_ps(k->s + i, _mm256_loadu_ps(angles + rope_half + i));
  }
  for (; i < rope_half; ++i) {
    k->c[i] = angles[i];
    k->s[i] = angles[rope_half + i];
  }
  for (; i < (np + 7) / 8 * 8; ++i) {  // the unrotated tail, then padding pairs
    k->c[i] = 1.0f;
    k->s[i] = 0.0f;
  }
}

// Per lane: step = a/32767 and inv = 32767/a where a > 1e-33 (below,
// 32767/a would overflow: such a vector counts as 0), else 0 — the scalar
// expressions lane by lane, as the AVX-512 QuantSteps.
HWY_INLINE void Avx2QuantSteps(__m256 a, float* HWY_RESTRICT step, float* HWY_RESTRICT inv) {
  const __m256 live = _mm256_cmp_ps(a, _mm256_set1_ps(1e-33f), _CMP_GT_OQ);
  const __m256 big = _mm256_set1_ps(32767.0f);
  _mm256_storeu_ps(step, _mm256_and_ps(live, _mm256_div_ps(a, big)));
  _mm256_storeu_ps(inv, _mm256_and_ps(live, _mm256_div_ps(big, a)));
}

// q' codes, δ and min term of the pass's g queries against the block in `k`.
// The min term's partial sums follow the AVX-512 fold's 16 lanes (pair P in
// lane P mod 16: lanes 0..7 in lo, 8..15 in hi, pairs in increasing order)
// and its reduction tree (hi + lo halves, then ReduceTree8 for the 8 queries
// at once, as the AVX-512 ReduceQueries), so the float result is the same;
// δ and 1/δ of the 8 queries take one division each.
HWY_INLINE void Avx2FoldQueries(size_t np8, size_t g, Avx2KeyFold* HWY_RESTRICT k) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 ya[kAvx2Pass], ym[kAvx2Pass];
  for (size_t i = 0; i < kAvx2Pass; ++i) {
    __m256 vb[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 amax = _mm256_setzero_ps();
    const size_t n = i < g ? np8 : 0;  // queries past g: zeros
    for (size_t i0 = 0; i0 < n; i0 += 8) {
      const __m256 a = _mm256_load_ps(k->qe[i] + i0);
      const __m256 b = _mm256_load_ps(k->qo[i] + i0);
      const __m256 c = _mm256_load_ps(k->c + i0);
      const __m256 s = _mm256_load_ps(k->s + i0);
      const __m256 r0 = _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s));
      const __m256 r1 = _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c));
      __m256& acc = vb[(i0 / 8) & 1];
      acc = _mm256_fmadd_ps(r0, _mm256_load_ps(k->m0 + i0), _mm256_fmadd_ps(r1, _mm256_load_ps(k->m1 + i0), acc));
      const __m256 p0 = _mm256_mul_ps(r0, _mm256_load_ps(k->s0 + i0));
      const __m256 p1 = _mm256_mul_ps(r1, _mm256_load_ps(k->s1 + i0));
      _mm256_store_ps(k->pe[i] + i0, p0);
      _mm256_store_ps(k->po[i] + i0, p1);
      amax = _mm256_max_ps(amax, _mm256_max_ps(_mm256_andnot_ps(sign, p0), _mm256_andnot_ps(sign, p1)));
    }
    ya[i] = _mm256_add_ps(vb[1], vb[0]);
    ym[i] = amax;
  }
  _mm256_storeu_ps(k->bias, ReduceTree8(ya, [](__m256 x, __m256 y) { return _mm256_add_ps(x, y); }));
  // A q' below ~1e-33 scores as 0 (error ≤ a·Σ code).
  alignas(32) float inv[kAvx2Pass];
  Avx2QuantSteps(ReduceTree8(ym, [](__m256 x, __m256 y) { return _mm256_max_ps(x, y); }), k->step, inv);
  // packs: [e0..3 o0..3 | e4..7 o4..7] per 128-bit lane; the byte shuffle pairs (e_j, o_j).
  const __m256i interleave = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
  for (size_t i = 0; i < g; ++i) {
    const __m256 vinv = _mm256_set1_ps(inv[i]);
    for (size_t i0 = 0; i0 < np8; i0 += 8) {
      const __m256i e = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(k->pe[i] + i0), vinv));
      const __m256i o = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(k->po[i] + i0), vinv));
      _mm256_store_si256(reinterpret_cast<__m256i*>(k->iq[i] + i0),
                         _mm256_shuffle_epi8(_mm256_packs_epi32(e, o), interleave));
    }
  }
}

// Token t's codes of channels (2p, 2p+1) as the int16 halves of int32 lane
// t. int8: k0 tokens 0..7, k1 8..15, k2 16..23, k3 24..31. int4 (channel c:
// 16 bytes, byte j = token j (low nibble) | token j + 16 (high)): the whole
// byte b = lo + 16·hi per word, in the lane order [0..3 | 8..11] (k0) and
// [4..7 | 12..15] (k1), and k2 = k0 >> 4, k3 = k1 >> 4 the high nibbles
// (tokens 16 + those): Σ q·b − 16·Σ q·(b >> 4) = Σ q·lo exactly in int32
// (wrapping), so the low nibbles need no mask. 5 instructions per pair
// (vpermq, 2 vpshufb, 2 shifts) against 8 for unpack + widen + mask + shift.
template <bool kInt4>
HWY_INLINE void Avx2KeyPair(const uint8_t* HWY_RESTRICT block, size_t p, __m256i& k0, __m256i& k1, __m256i& k2,
                            __m256i& k3) {
  if constexpr (kInt4) {
    // [x0..7 y0..7 | x8..15 y8..15] (x: channel 2p, y: 2p+1), then per lane
    // words (x_t, y_t) of 4 tokens, zero high bytes (index −1).
    const __m256i xy = _mm256_permute4x64_epi64(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32 * p)), 0xD8);
    const __m256i lo4 = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, -1, 8, -1, 1, -1, 9, -1, 2, -1, 10, -1, 3, -1, 11, -1));
    const __m256i hi4 = _mm256_broadcastsi128_si256(_mm_setr_epi8(4, -1, 12, -1, 5, -1, 13, -1, 6, -1, 14, -1, 7, -1, 15, -1));
    k0 = _mm256_shuffle_epi8(xy, lo4);
    k1 = _mm256_shuffle_epi8(xy, hi4);
    k2 = _mm256_srli_epi16(k0, 4);
    k3 = _mm256_srli_epi16(k1, 4);
  } else {  // channel c: 32 bytes, byte t = token t
    const uint8_t* r = block + 64 * p;
    const __m128i xl = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r));
    const __m128i xh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 16));
    const __m128i yl = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 32));
    const __m128i yh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 48));
    k0 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(xl, yl));
    k1 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(xl, yl));
    k2 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(xh, yh));
    k3 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(xh, yh));
  }
}

// acc += vpmaddwd(k, x) in place. GCC 12 otherwise renamed the accumulators
// through extra register moves every channel pair and spilled one (8
// vmovdqa and a store/reload per pair against 16 dot instructions).
// kVnni: the same sum in one AVX-VNNI vpdpwssd (int32 lanes wrap in both;
// the sums never come near: see the bounds above). {vex} forces the VEX
// form: the assembler would otherwise pick AVX512_VNNI's EVEX encoding,
// which an AVX-VNNI CPU without AVX-512 (Alder Lake) does not execute; "x"
// keeps the registers in ymm0–15, all VEX can name.
template <bool kVnni>
HWY_INLINE __m256i MaddAdd(__m256i acc, __m256i k, __m256i x) {
  if constexpr (kVnni) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(k), "x"(x));
  } else {
    __m256i t;
    __asm__("vpmaddwd %2, %3, %1\n\tvpaddd %1, %0, %0" : "+x"(acc), "=&x"(t) : "x"(k), "x"(x));
  }
  return acc;
}

// out[i·out_stride + t] for queries q0, q0+1 (kQ of them) and the block's 32
// tokens: acc += vpmaddwd(key pair, broadcast query pair) per channel pair.
template <int kQ, bool kInt4, bool kVnni>
HWY_INLINE void Avx2ScoreBlock(size_t np, const uint8_t* HWY_RESTRICT block, const Avx2KeyFold& k, size_t q0,
                               float scale, float* HWY_RESTRICT out, size_t out_stride) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  __m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const int32_t* qa = k.iq[q0];
  const int32_t* qb = k.iq[q0 + (kQ > 1 ? 1 : 0)];
  for (size_t p = 0; p < np; ++p) {
    __m256i k0, k1, k2, k3;
    Avx2KeyPair<kInt4>(block, p, k0, k1, k2, k3);
    const __m256i x = _mm256_set1_epi32(qa[p]);
    a0 = MaddAdd<kVnni>(a0, k0, x);
    a1 = MaddAdd<kVnni>(a1, k1, x);
    a2 = MaddAdd<kVnni>(a2, k2, x);
    a3 = MaddAdd<kVnni>(a3, k3, x);
    if constexpr (kQ > 1) {
      const __m256i y = _mm256_set1_epi32(qb[p]);
      b0 = MaddAdd<kVnni>(b0, k0, y);
      b1 = MaddAdd<kVnni>(b1, k1, y);
      b2 = MaddAdd<kVnni>(b2, k2, y);
      b3 = MaddAdd<kVnni>(b3, k3, y);
    }
  }
  const auto finish = [&](__m256i v0, __m256i v1, __m256i v2, __m256i v3, size_t i, float* HWY_RESTRICT o) {
    if constexpr (kInt4) {  // low nibbles = whole bytes − 16·high; token order [0..3 | 8..11], [4..7 | 12..15]
      const __m256i l0 = _mm256_sub_epi32(v0, _mm256_slli_epi32(v2, 4));
      const __m256i l1 = _mm256_sub_epi32(v1, _mm256_slli_epi32(v3, 4));
      v0 = _mm256_permute2x128_si256(l0, l1, 0x20);
      v1 = _mm256_permute2x128_si256(l0, l1, 0x31);
      const __m256i h0 = v2;
      v2 = _mm256_permute2x128_si256(h0, v3, 0x20);
      v3 = _mm256_permute2x128_si256(h0, v3, 0x31);
    }
    const __m256 st = _mm256_set1_ps(k.step[i] * scale);
    const __m256 bs = _mm256_set1_ps(k.bias[i] * scale);
    _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v0), st, bs));
    _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v1), st, bs));
    _mm256_storeu_ps(o + 16, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v2), st, bs));
    _mm256_storeu_ps(o + 24, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v3), st, bs));
  };
  finish(a0, a1, a2, a3, q0, out);
  if constexpr (kQ > 1) finish(b0, b1, b2, b3, q0 + 1, out + out_stride);
}

// ScoreKeyBlocksMulti for int8/int4 keys, nq ≥ 2: passes of ≤ 8 queries;
// per block the scales, mins and angles are split once, the queries folded
// and quantized once (their reductions and divisions together), then the keys are decoded once per 2 queries (16
// ymm registers: 8 accumulators, 4 key vectors).
template <bool kInt4, bool kVnni>
HWY_NOINLINE void Avx2ScoreKeyBlocksMulti(KvFormat f, int d, int rope_dim, const float* HWY_RESTRICT q, size_t nq,
                                          const float* HWY_RESTRICT rot, const uint8_t* const* HWY_RESTRICT blocks,
                                          size_t n_blocks, float scale, float* HWY_RESTRICT scores, size_t stride) {
  const size_t np = static_cast<size_t>(d) / 2;
  const size_t np8 = (np + 7) / 8 * 8;
  const size_t rope_half = static_cast<size_t>(rope_dim) / 2;
  const size_t block_bytes = KeyBlockBytes(f, d);
  Avx2KeyFold k;
  for (size_t p0 = 0; p0 < nq; p0 += kAvx2Pass) {
    const size_t g = std::min(kAvx2Pass, nq - p0);
    for (size_t i = 0; i < g; ++i) {
      const float* qi = q + (p0 + i) * static_cast<size_t>(d);
      for (size_t j = 0; j < np8; ++j) {
        k.qe[i][j] = j < np ? qi[2 * j] : 0.0f;
        k.qo[i][j] = j < np ? qi[2 * j + 1] : 0.0f;
      }
    }
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* HWY_RESTRICT block = blocks[b];
      PrefetchBlock(blocks, n_blocks, b, block_bytes);
      PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
      Avx2LoadBlockFold(f, d, rope_half, block, rot + b * static_cast<size_t>(rope_dim), &k);
      Avx2FoldQueries(np8, g, &k);
      float* out = scores + p0 * stride + b * kAvx2Tokens;
      size_t i = 0;
      for (; i + 2 <= g; i += 2) Avx2ScoreBlock<2, kInt4, kVnni>(np, block, k, i, scale, out + i * stride, stride);
      if (i < g) Avx2ScoreBlock<1, kInt4, kVnni>(np, block, k, i, scale, out + i * stride, stride);
    }
  }
}

// ------------------------------------------------ values (int8/int4, D ≥ 32)
//
// The AVX-512 VNNI value semantics (kv_kernels.h, AccumulateValueBlocksMulti),
// bit for bit: per (query, block, value group j) ws_t = w_t·scale_{t,j} is
// rounded to int16 with step δ = max_t |ws_t| / 32767 (0 below 1e-33), a
// token pair's codes of 8 channels (int16 halves of int32 lane c) meet the
// pair's two weight codes in one vpmaddwd (exact; over a block
// |Σ| ≤ 32767·255·32 < 2^31), and out += δ·float(Σ) per block; the mins'
// share Σ_t w_t·min_{t,j} is summed in the AVX-512 fold's 16 lanes (token t
// in lane t mod 16) and reduced by its tree, once per call.

constexpr size_t kAvx2ValueGroups = kMaxHeadDim / kValueGroup;  // cg ≤ 8

// One block's value scales and mins as f32, group-major [j][t] (shared by
// the pass's queries), and the pass's weight codes for that block.
struct Avx2ValueFold {
  alignas(32) float s[kAvx2ValueGroups][kAvx2Tokens];
  alignas(32) float m[kAvx2ValueGroups][kAvx2Tokens];
  alignas(32) float flat[kAvx2Tokens * kAvx2ValueGroups];          // [t][j] as stored, widened
  alignas(32) int32_t iw[kAvx2Pass][kAvx2ValueGroups][kAvx2Tokens / 2];  // [query][group][token pair]
  float step[kAvx2Pass][kAvx2ValueGroups];                         // [query][group] δ
  alignas(32) float wm[kAvx2Pass][kAvx2ValueGroups][16];           // [query][group][lane] Σ w·min partial sums
};

// f16 [G][cg] → f32 [j][t].
HWY_INLINE void Avx2ValueScales(const uint8_t* HWY_RESTRICT src, size_t cg, float* HWY_RESTRICT flat,
                                float (*HWY_RESTRICT dst)[kAvx2Tokens]) {
  if (cg == 2) {  // the TinyLlama / Llama head dim 64: a pair split
    for (int t = 0; t < kAvx2Tokens; t += 8) Avx2SplitF16Pairs(src + 4 * t, false, dst[0] + t, dst[1] + t);
    return;
  }
  F32FromF16Array(src, kAvx2Tokens * cg, flat);
  for (size_t j = 0; j < cg; ++j) {
    for (int t = 0; t < kAvx2Tokens; ++t) dst[j][t] = flat[static_cast<size_t>(t) * cg + j];
  }
}

// Weight codes and δ of the pass's g queries for every group of the block;
// wm += w·min. The max |w·scale| of each (query, group) is reduced 8 at a
// time (ReduceTree8; max is exact in any order, so the result equals the
// AVX-512 per-vector reduction) and δ, 1/δ take one division per 8.
HWY_INLINE void Avx2FoldValueWeights(size_t cg, const float* HWY_RESTRICT w, size_t w_stride, size_t g,
                                     Avx2ValueFold* HWY_RESTRICT v) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  constexpr size_t kMaxFolds = kAvx2Pass * kAvx2ValueGroups;
  __m256 ym[kMaxFolds];
  const size_t n = g * cg;
  for (size_t i = 0; i < g; ++i) {
    const float* wi = w + i * w_stride;
    const __m256 w0 = _mm256_loadu_ps(wi), w1 = _mm256_loadu_ps(wi + 8);
    const __m256 w2 = _mm256_loadu_ps(wi + 16), w3 = _mm256_loadu_ps(wi + 24);
    for (size_t j = 0; j < cg; ++j) {
      const float* sj = v->s[j];
      const float* mj = v->m[j];
      const __m256 a0 = _mm256_mul_ps(w0, _mm256_load_ps(sj));
      const __m256 a1 = _mm256_mul_ps(w1, _mm256_load_ps(sj + 8));
      const __m256 a2 = _mm256_mul_ps(w2, _mm256_load_ps(sj + 16));
      const __m256 a3 = _mm256_mul_ps(w3, _mm256_load_ps(sj + 24));
      float* wm = v->wm[i][j];  // lane l: tokens l and 16 + l, as the 16-lane fold
      _mm256_store_ps(wm, _mm256_fmadd_ps(w0, _mm256_load_ps(mj),
                                          _mm256_fmadd_ps(w2, _mm256_load_ps(mj + 16), _mm256_load_ps(wm))));
      _mm256_store_ps(wm + 8, _mm256_fmadd_ps(w1, _mm256_load_ps(mj + 8),
                                              _mm256_fmadd_ps(w3, _mm256_load_ps(mj + 24), _mm256_load_ps(wm + 8))));
      ym[i * cg + j] = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, a0), _mm256_andnot_ps(sign, a1)),
                                     _mm256_max_ps(_mm256_andnot_ps(sign, a2), _mm256_andnot_ps(sign, a3)));
    }
  }
  alignas(32) float step[kMaxFolds], inv[kMaxFolds];  // [i·cg + j]
  for (size_t f = n; f % 8 != 0; ++f) ym[f] = _mm256_setzero_ps();
  for (size_t f = 0; f < n; f += 8) {
    Avx2QuantSteps(ReduceTree8(ym + f, [](__m256 x, __m256 y) { return _mm256_max_ps(x, y); }), step + f, inv + f);
  }
  for (size_t i = 0; i < g; ++i) {
    const float* wi = w + i * w_stride;
    const __m256 w0 = _mm256_loadu_ps(wi), w1 = _mm256_loadu_ps(wi + 8);
    const __m256 w2 = _mm256_loadu_ps(wi + 16), w3 = _mm256_loadu_ps(wi + 24);
    for (size_t j = 0; j < cg; ++j) {
      const float* sj = v->s[j];
      v->step[i][j] = step[i * cg + j];
      const __m256 vinv = _mm256_set1_ps(inv[i * cg + j]);
      const __m256 a0 = _mm256_mul_ps(w0, _mm256_load_ps(sj));
      const __m256 a1 = _mm256_mul_ps(w1, _mm256_load_ps(sj + 8));
      const __m256 a2 = _mm256_mul_ps(w2, _mm256_load_ps(sj + 16));
      const __m256 a3 = _mm256_mul_ps(w3, _mm256_load_ps(sj + 24));
      // packs gives [t0..3 t8..11 | t4..7 t12..15] of two 8-token vectors; vpermq 0xD8 orders them.
      const __m256i lo = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(a0, vinv)),
                                            _mm256_cvtps_epi32(_mm256_mul_ps(a1, vinv)));
      const __m256i hi = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(a2, vinv)),
                                            _mm256_cvtps_epi32(_mm256_mul_ps(a3, vinv)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(v->iw[i][j]), _mm256_permute4x64_epi64(lo, 0xD8));
      _mm256_store_si256(reinterpret_cast<__m256i*>(v->iw[i][j] + 8), _mm256_permute4x64_epi64(hi, 0xD8));
    }
  }
}

// Two tokens' 16 code bytes (x: token t, y: token t+1) as int32 lanes
// c = (x_c, y_c) in int16 halves: lo channels 0..7, hi 8..15.
HWY_INLINE void Avx2TokenPair(__m128i x, __m128i y, __m256i& lo, __m256i& hi) {
  lo = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x, y));
  hi = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(x, y));
}

HWY_INLINE __m128i Avx2Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// out[i·D + c] += Σ_t δ·iw·code for queries q0 (, q0 + 1) and one block:
// per 16-channel chunk c0 < D/2 and its partner c0 + D/2, 16 token pairs.
template <int kQ, bool kInt4, bool kVnni>
HWY_INLINE void Avx2ValueBlock(size_t D, const uint8_t* HWY_RESTRICT block, const Avx2ValueFold& v, size_t q0,
                               float* HWY_RESTRICT out) {
  const size_t half = D / 2;
  const size_t row = kInt4 ? half : D;  // code bytes per token
  const int32_t(*iwa)[kAvx2Tokens / 2] = v.iw[q0];
  const int32_t(*iwb)[kAvx2Tokens / 2] = v.iw[q0 + (kQ > 1 ? 1 : 0)];
  for (size_t c0 = 0; c0 < half; c0 += 16) {
    const size_t jl = c0 / kValueGroup, jh = (c0 + half) / kValueGroup;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    __m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (size_t tp = 0; tp < kAvx2Tokens / 2; ++tp) {
      const uint8_t* r = block + 2 * tp * row + c0;
      __m256i l0, l1, h0, h1;  // channels c0..c0+7, c0+8..c0+15, then + D/2
      if constexpr (kInt4) {  // byte j: channel j (low nibble), j + D/2 (high)
        __m256i w0, w1;
        Avx2TokenPair(Avx2Load16(r), Avx2Load16(r + row), w0, w1);
        const __m256i nibble = _mm256_set1_epi16(0x0F);
        l0 = _mm256_and_si256(w0, nibble);
        l1 = _mm256_and_si256(w1, nibble);
        h0 = _mm256_srli_epi16(w0, 4);
        h1 = _mm256_srli_epi16(w1, 4);
      } else {
        Avx2TokenPair(Avx2Load16(r), Avx2Load16(r + row), l0, l1);
        Avx2TokenPair(Avx2Load16(r + half), Avx2Load16(r + row + half), h0, h1);
      }
      const __m256i xl = _mm256_set1_epi32(iwa[jl][tp]);
      const __m256i xh = _mm256_set1_epi32(iwa[jh][tp]);
      a0 = MaddAdd<kVnni>(a0, l0, xl);
      a1 = MaddAdd<kVnni>(a1, l1, xl);
      a2 = MaddAdd<kVnni>(a2, h0, xh);
      a3 = MaddAdd<kVnni>(a3, h1, xh);
      if constexpr (kQ > 1) {
        const __m256i yl = _mm256_set1_epi32(iwb[jl][tp]);
        const __m256i yh = _mm256_set1_epi32(iwb[jh][tp]);
        b0 = MaddAdd<kVnni>(b0, l0, yl);
        b1 = MaddAdd<kVnni>(b1, l1, yl);
        b2 = MaddAdd<kVnni>(b2, h0, yh);
        b3 = MaddAdd<kVnni>(b3, h1, yh);
      }
    }
    const auto finish = [&](__m256i v0, __m256i v1, __m256i v2, __m256i v3, size_t i, float* HWY_RESTRICT o) {
      const __m256 sl = _mm256_set1_ps(v.step[i][jl]);
      const __m256 sh = _mm256_set1_ps(v.step[i][jh]);
      _mm256_storeu_ps(o + c0, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v0), sl, _mm256_loadu_ps(o + c0)));
      _mm256_storeu_ps(o + c0 + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v1), sl, _mm256_loadu_ps(o + c0 + 8)));
      _mm256_storeu_ps(o + c0 + half, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v2), sh, _mm256_loadu_ps(o + c0 + half)));
      _mm256_storeu_ps(o + c0 + half + 8,
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(v3), sh, _mm256_loadu_ps(o + c0 + half + 8)));
    };
    finish(a0, a1, a2, a3, q0, out + q0 * D);
    if constexpr (kQ > 1) finish(b0, b1, b2, b3, q0 + 1, out + (q0 + 1) * D);
  }
}

// AccumulateValueBlocksMulti for int8/int4 values, D a multiple of 32,
// nq ≥ 2: passes of ≤ 8 queries; per block the scales and mins are widened
// once, the queries' weights folded once (their reductions and divisions
// together), the codes decoded once per 2 queries.
template <bool kInt4, bool kVnni>
HWY_NOINLINE void Avx2AccumulateValueBlocksMulti(KvFormat f, int d, const float* HWY_RESTRICT weights,
                                                 size_t weights_stride, size_t nq,
                                                 const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                                                 float* HWY_RESTRICT out) {
  const size_t D = static_cast<size_t>(d);
  const size_t cg = D / kValueGroup;
  const size_t block_bytes = ValueBlockBytes(f, d);
  Avx2ValueFold v;
  for (size_t p0 = 0; p0 < nq; p0 += kAvx2Pass) {
    const size_t g = std::min(kAvx2Pass, nq - p0);
    const float* w = weights + p0 * weights_stride;
    float* o = out + p0 * D;
    std::fill(&v.wm[0][0][0], &v.wm[0][0][0] + kAvx2Pass * kAvx2ValueGroups * 16, 0.0f);
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* HWY_RESTRICT block = blocks[b];
      PrefetchBlock(blocks, n_blocks, b, block_bytes);
      PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
      Avx2ValueScales(block + ValueBlockScalesOffset(f, d), cg, v.flat, v.s);
      Avx2ValueScales(block + ValueBlockMinsOffset(f, d), cg, v.flat, v.m);
      Avx2FoldValueWeights(cg, w + b * kAvx2Tokens, weights_stride, g, &v);
      size_t i = 0;
      for (; i + 2 <= g; i += 2) Avx2ValueBlock<2, kInt4, kVnni>(D, block, v, i, o);
      if (i < g) Avx2ValueBlock<1, kInt4, kVnni>(D, block, v, i, o);
    }
    // The mins' share: out_i[c] += Σ_b Σ_t w·min of c's group (the 16-lane tree).
    for (size_t i = 0; i < g; ++i) {
      for (size_t j = 0; j < cg; ++j) {
        const __m256 y = _mm256_add_ps(_mm256_load_ps(v.wm[i][j] + 8), _mm256_load_ps(v.wm[i][j]));
        const __m128 z = _mm_add_ps(_mm256_extractf128_ps(y, 1), _mm256_castps256_ps128(y));
        const __m128 t = _mm_add_ps(_mm_movehl_ps(z, z), z);
        const float bias = _mm_cvtss_f32(_mm_add_ss(_mm_movehdup_ps(t), t));
        for (size_t c = 0; c < static_cast<size_t>(kValueGroup); ++c) o[i * D + j * kValueGroup + c] += bias;
      }
    }
  }
}

#endif  // HWY_TARGET == HWY_AVX2

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_KV_KERNELS_AVX2_INL_H_
