// Q3_K and Q2_K products in the interleaved layout (WeightLayout::
// kInterleaved16, model_kernels.h), compiled once per Highway target, on
// Q8_K activations (QuantizeRowQ8KFast, matvec_kquant.h).
//
// One row per int32 lane, as matvec_kquant_interleaved.cc does for Q4_K: a
// 64-byte line holds 4 bytes of each of 16 rows. Q2_K keeps GGUF's bits:
// code vector (v, j) = bits 2j, 2j+1 of qs line v holds weights 128h + 32j
// + 4(v%8) + t (h = v/8) of every row, sub-block 8h + 2j + (v%8)/4 of 16.
// Q3_K's codes are re-coded at repack (model_kernels.h): code line triple
// T holds the 8 code vectors of sub-blocks 2T and 2T + 1, each its
// unsigned code c = q + 4 ∈ [0, 8) whole in one or two bytes, and
// Σ q·a = Σ c·a − 4·bsum (the Q8_K per-16 sums). Per sub-block of 16
// weights and input vector, its 4 code vectors meet the broadcast
// activations:
//   AVX3_DL: codes by vgf2p8affineqb (bit gathers; Q3_K's codes 6 and 7:
//     two and an OR), 4 vpdpbusd into an int32 dot per row, (Q3_K:
//     − 4·bsum), times the row's sub-block scale (vpmulld), added to S;
//   AVX2 (and AVX3 without VNNI, on 256-bit vectors): codes by shift and
//     mask, 4 vpmaddubsw summed in int16 (Q3_K: − 2·bsum per lane, pairs
//     ≤ 4·2·7·127 + 4064), one vpmaddwd against the (scale, scale) int16
//     pairs adds sc·dot to S (Q2_K's MatVec, Q2TileMatVec: odd-j codes in
//     place as 4c, summed apart, so a qs line costs one shift);
//   the other targets: the same integer sums, row by row (scalar; those
//     targets keep GGUF's rows: InterleavedWeightsPreferred is false).
// Q2_K's M = Σ_g min_g·bsum_g is int16 pair multiply-adds of the rows' mins
// against the activations' sums. S and M are exact int32, folded per
// super-block as ref::MatVecRowsQ8K does, so MatVec, every MatMul tile and
// the reference agree bit for bit. MatVec streams the group with software
// prefetch kStreamPrefetchBytes ahead (x86_chain-inl.h).
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simd/half_inline.h"
#include "simd/matvec_kquant.h"
#include "simd/matvec_q23k_interleaved.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_q23k_interleaved.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "simd/kquant_interleaved_common-inl.h"  // kil::, InterleavedKRows, LoadU32
#include "simd/x86_chain-inl.h"  // PrefetchStreamAhead, StreamAt, kStreamPrefetchBytes

#ifndef KVEDGE_SIMD_MATVEC_Q23K_INTERLEAVED_ONCE_
#define KVEDGE_SIMD_MATVEC_Q23K_INTERLEAVED_ONCE_
namespace kvedge {
namespace q23il {

// Input vectors quantized at a time; each group's chunk streams once per tile.
constexpr size_t kTile = 4;

// One input vector's Q8_K activations over one chunk, plus per super-block
// the per-16 sums bsums[g] in the forms the kernels broadcast.
struct QChunk {
  BlockQ8_K a[kil::kChunkSuperBlocks];
  int32_t bsum4[kil::kChunkSuperBlocks][16];       // 4·bsums[g] (Q3_K, AVX3_DL)
  int32_t bsum2_pair[kil::kChunkSuperBlocks][16];  // int16 pair (2·bsums[g], 2·bsums[g]) (Q3_K, AVX2)
  // Q2_K's mins: (bsums[4k], bsums[4k+2]), (bsums[4k+1], bsums[4k+3]) at 2k, 2k + 1.
  int32_t min_pairs[kil::kChunkSuperBlocks][8];
};

// x: f32 [nsb·256] → c (nsb ≤ kil::kChunkSuperBlocks).
inline void PrepareChunk(const float* x, size_t nsb, QChunk* c) {
  QuantizeRowQ8KFast(x, c->a, nsb * kSuperBlock);
  for (size_t s = 0; s < nsb; ++s) {
    const int16_t* b = c->a[s].bsums;  // |b| ≤ 16·127: 4·b fits int16
    for (int g = 0; g < 16; ++g) {
      c->bsum4[s][g] = 4 * b[g];
      c->bsum2_pair[s][g] = kil::PackPair(2 * b[g], 2 * b[g]);
    }
    for (int k = 0; k < 4; ++k) {
      c->min_pairs[s][2 * k] = kil::PackPair(b[4 * k], b[4 * k + 2]);
      c->min_pairs[s][2 * k + 1] = kil::PackPair(b[4 * k + 1], b[4 * k + 3]);
    }
  }
}

// Offset of super-block s's first byte in its group and its bytes (Q3_K:
// an even super-block starts with its pair's 64 bytes of d).
inline size_t SuperBegin(WeightType t, size_t s) {
  return t == WeightType::kQ2_K ? s * kILQ2SuperBytes : s / 2 * kILQ3PairBytes + (s & 1) * (64 + kILQ3BodyBytes);
}

}  // namespace q23il
}  // namespace kvedge
#endif  // KVEDGE_SIMD_MATVEC_Q23K_INTERLEAVED_ONCE_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

using q23il::QChunk;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// Prefetches the lines kStreamPrefetchBytes past super-block cb + s's
// bytes of the group's chunk span [cb, cb + nsb) (MatVec reads ≈ 1.3–1.8
// KiB per super-block of 16 rows).
HWY_INLINE void PrefetchAhead(WeightType t, const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                              size_t s) {
  PrefetchStreamAhead<kStreamPrefetchBytes>(group, group_bytes, q23il::SuperBegin(t, cb),
                                            q23il::SuperBegin(t, cb + nsb), q23il::SuperBegin(t, cb + s),
                                            q23il::SuperBegin(t, cb + s + 1));
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
constexpr size_t kTileVecs = 4;

// acc − the int32 at p broadcast (from memory).
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i SubBroadcast(__m512i acc, const int32_t* p) {
  return _mm512_sub_epi32(acc, _mm512_set1_epi32(*p));
}

// The GF(2) affine matrix (vgf2p8affineqb: output bit i = parity of the
// input bits in byte 7 − i) that moves input bits b0, b1, b2 to bits 0, 1,
// 2 (b < 0: that output bit 0).
constexpr long long GatherBits(int b0, int b1, int b2 = -1) {
  unsigned long long m = 0;
  const int from[3] = {b0, b1, b2};
  for (int i = 0; i < 3; ++i) {
    if (from[i] >= 0) m |= (1ull << from[i]) << (8 * (7 - i));
  }
  return static_cast<long long>(m);
}

// Q3_K's code vector m < 8 from its triple of re-coded lines (A, B, C)
// (model_kernels.h): one bit gather, or two and an OR (m = 6, 7).
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Q3Code(size_t m, __m512i a, __m512i b, __m512i c) {
  if (m < 6) {
    const __m512i x = m < 2 ? a : m < 4 ? b : c;
    const int at = m % 2 == 0 ? 0 : 3;
    return _mm512_gf2p8affine_epi64_epi8(x, _mm512_set1_epi64(GatherBits(at, at + 1, at + 2)), 0);
  }
  return _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(m == 6 ? a : b, _mm512_set1_epi64(GatherBits(6, 7)), 0),
                         _mm512_gf2p8affine_epi64_epi8(c, _mm512_set1_epi64(GatherBits(-1, -1, m == 6 ? 6 : 7)), 0));
}

// Sign-extended byte b of every int32 lane.
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i SignedByte(__m512i x, size_t b) {
  return _mm512_srai_epi32(_mm512_slli_epi32(x, static_cast<unsigned>(24 - 8 * b)), 24);
}

// y[v·y_stride + row0 + r] (r < valid_rows) for the V vectors xc[0, V) over
// the chunk's super-blocks [cb, cb + nsb) of the Q3_K group at `group`; the
// sums continue from y when cb > 0 (same order as one pass).
template <size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void Q3Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                                             const QChunk* xc, float* y, size_t y_stride, size_t row0,
                                             size_t valid_rows) {
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  __m512 sum[V];
  for (size_t v = 0; v < V; ++v) {
    sum[v] = cb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + v * y_stride + row0);
  }
  const __m512i k0f = _mm512_set1_epi32(0x0f0f0f0f), k03 = _mm512_set1_epi32(0x03030303);
  const __m512i k32 = _mm512_set1_epi8(32);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* body = group + InterleavedQ3KBodyOffset(cb + s);
    PrefetchAhead(WeightType::kQ3_K, group, group_bytes, cb, nsb, s);
    // ggml's 6-bit scale unpacking (UnpackQ3KScales), one row per lane; − 32.
    const __m512i u0 = _mm512_load_si512(body + kILQ3ScalesOffset);
    const __m512i u1 = _mm512_load_si512(body + kILQ3ScalesOffset + 64);
    const __m512i u2 = _mm512_load_si512(body + kILQ3ScalesOffset + 128);
    __m512i sc4[4];
    sc4[0] = _mm512_or_si512(_mm512_and_si512(u0, k0f), _mm512_slli_epi32(_mm512_and_si512(u2, k03), 4));
    sc4[1] = _mm512_or_si512(_mm512_and_si512(u1, k0f),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u2, 2), k03), 4));
    sc4[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u0, 4), k0f),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u2, 4), k03), 4));
    sc4[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u1, 4), k0f),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u2, 6), k03), 4));
    for (__m512i& v : sc4) v = _mm512_sub_epi8(v, k32);
    __m512i isum[V];
    for (size_t v = 0; v < V; ++v) isum[v] = _mm512_setzero_si512();
    for (size_t tri = 0; tri < 8; ++tri) {  // sub-blocks 2·tri, 2·tri + 1
      const uint8_t* lines = body + kILQ3CodesOffset + 3 * 64 * tri;
      const __m512i a = _mm512_load_si512(lines), b = _mm512_load_si512(lines + 64);
      const __m512i c = _mm512_load_si512(lines + 128);
#pragma GCC unroll 2
      for (size_t k = 0; k < 2; ++k) {
        const size_t g = 2 * tri + k;  // sub-block of 16
        __m512i w[4];
#pragma GCC unroll 4
        for (size_t i = 0; i < 4; ++i) w[i] = Q3Code(4 * k + i, a, b, c);
        const __m512i sc = SignedByte(sc4[g / 4], g % 4);
        for (size_t v = 0; v < V; ++v) {
          const int8_t* q = xc[v].a[s].qs + 16 * g;
          __m512i acc = _mm512_setzero_si512();
          for (size_t i = 0; i < 4; ++i) acc = Dpbusd(acc, w[i], q + 4 * i);
          acc = SubBroadcast(acc, &xc[v].bsum4[s][g]);
          isum[v] = _mm512_add_epi32(isum[v], _mm512_mullo_epi32(acc, sc));
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(group + InterleavedQ3KDOffset(cb + s))));
    for (size_t v = 0; v < V; ++v) {
      sum[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[v]), _mm512_mul_ps(dw, _mm512_set1_ps(xc[v].a[s].d)), sum[v]);
    }
  }
  for (size_t v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + v * y_stride + row0, mask, sum[v]);
}

// As Q3Tile for Q2_K: 2-bit codes, unsigned 4-bit scales, M from the mins.
template <size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void Q2Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                                             const QChunk* xc, float* y, size_t y_stride, size_t row0,
                                             size_t valid_rows) {
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  __m512 sum[V];
  for (size_t v = 0; v < V; ++v) {
    sum[v] = cb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + v * y_stride + row0);
  }
  const __m512i k0f = _mm512_set1_epi32(0x0f0f0f0f), low_bytes = _mm512_set1_epi32(0x00FF00FF);
  const __m512i byte = _mm512_set1_epi32(0xFF);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = group + (cb + s) * kILQ2SuperBytes;
    PrefetchAhead(WeightType::kQ2_K, group, group_bytes, cb, nsb, s);
    __m512i sc4[4], mn4[4];  // bytes of scales[4k … 4k+3]: low nibbles, high nibbles
    for (size_t k = 0; k < 4; ++k) {
      const __m512i u = _mm512_load_si512(sb + kILQ2ScalesOffset + 64 * k);
      sc4[k] = _mm512_and_si512(u, k0f);
      mn4[k] = _mm512_and_si512(_mm512_srli_epi32(u, 4), k0f);
    }
    __m512i isum[V];
    for (size_t v = 0; v < V; ++v) isum[v] = _mm512_setzero_si512();
    for (size_t h = 0; h < 2; ++h) {
      for (size_t j = 0; j < 4; ++j) {
        const __m512i mlo = _mm512_set1_epi64(GatherBits(static_cast<int>(2 * j), static_cast<int>(2 * j + 1)));
        for (size_t k = 0; k < 2; ++k) {
          const size_t g = 8 * h + 2 * j + k;
          __m512i w[4];
          for (size_t i = 0; i < 4; ++i) {
            const __m512i qs = _mm512_load_si512(sb + kILQ2QsOffset + 64 * (8 * h + 4 * k + i));
            w[i] = _mm512_gf2p8affine_epi64_epi8(qs, mlo, 0);
          }
          const __m512i sc = _mm512_and_si512(_mm512_srli_epi32(sc4[g / 4], static_cast<unsigned>(8 * (g % 4))), byte);
          for (size_t v = 0; v < V; ++v) {
            const int8_t* q = xc[v].a[s].qs + 128 * h + 32 * j + 16 * k;
            __m512i acc = _mm512_setzero_si512();
            for (size_t i = 0; i < 4; ++i) acc = Dpbusd(acc, w[i], q + 4 * i);
            isum[v] = _mm512_add_epi32(isum[v], _mm512_mullo_epi32(acc, sc));
          }
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + kILQ2DOffset)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + kILQ2DminOffset)));
    for (size_t v = 0; v < V; ++v) {
      const int32_t* mp = xc[v].min_pairs[s];
      __m512i m = _mm512_setzero_si512();
      for (size_t k = 0; k < 4; ++k) {
        m = _mm512_dpwssd_epi32(m, _mm512_and_si512(mn4[k], low_bytes), _mm512_set1_epi32(mp[2 * k]));
        m = _mm512_dpwssd_epi32(m, _mm512_srli_epi16(mn4[k], 8), _mm512_set1_epi32(mp[2 * k + 1]));
      }
      const float dx = xc[v].a[s].d;
      sum[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[v]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), sum[v]);
      sum[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, _mm512_set1_ps(-dx)), sum[v]);
    }
  }
  for (size_t v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + v * y_stride + row0, mask, sum[v]);
}
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// 8 rows per 256-bit vector: a group is two halves, rows 8h … 8h + 7 at
// byte 32h of every line (and 16h of the f16 arrays).
constexpr size_t kTileVecs = 4;
constexpr size_t kHalfRows = 8;

// One half's (8 rows at the line's byte 32·half) scales of a super-block
// from its scale lines at `scales`: sc[g] = sub-block g's scale as (sc, sc)
// int16 pairs per row (Q3_K: ggml's 6-bit unpacking, − 32; Q2_K: the low
// nibbles), mn4[k] = Q2_K's min nibbles of scales 4k … 4k + 3 (bytes).
template <bool kQ3>
HWY_INLINE void HalfScales(const uint8_t* scales, __m256i* sc, __m256i* mn4) {
  const __m256i k0f = _mm256_set1_epi32(0x0f0f0f0f), k03 = _mm256_set1_epi32(0x03030303);
  __m256i sc4[4];  // Q3_K: unpacked scale bytes; Q2_K: scale nibbles
  if constexpr (kQ3) {
    const __m256i u0 = Load256(scales), u1 = Load256(scales + 64), u2 = Load256(scales + 128);
    sc4[0] = _mm256_or_si256(_mm256_and_si256(u0, k0f), _mm256_slli_epi32(_mm256_and_si256(u2, k03), 4));
    sc4[1] = _mm256_or_si256(_mm256_and_si256(u1, k0f),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u2, 2), k03), 4));
    sc4[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u0, 4), k0f),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k03), 4));
    sc4[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u1, 4), k0f),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u2, 6), k03), 4));
    (void)mn4;
  } else {
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      const __m256i u = Load256(scales + 64 * k);
      sc4[k] = _mm256_and_si256(u, k0f);
      mn4[k] = _mm256_and_si256(_mm256_srli_epi32(u, 4), k0f);
    }
  }
#pragma GCC unroll 16
  for (size_t g = 0; g < 16; ++g) {
    const __m256i pair = _mm256_shuffle_epi8(sc4[g / 4], PairPattern(g % 4));
    sc[g] = kQ3 ? _mm256_sub_epi16(pair, _mm256_set1_epi16(32)) : pair;
  }
}

// Q3_K's code vector m < 8 (weights 32T + 4m + t of 8 rows) from its
// triple T of re-coded lines (A, B, C) (model_kernels.h): one AND, a shift
// and an AND, or five operations for the two codes split over two lines
// (m = 6, 7). 16-bit shifts: every bit that crosses a byte is masked off.
HWY_INLINE __m256i Q3Code(size_t m, __m256i a, __m256i b, __m256i c) {
  const __m256i k7 = _mm256_set1_epi8(7);
  if (m < 6) {
    const __m256i x = m < 2 ? a : m < 4 ? b : c;
    return _mm256_and_si256(m % 2 == 0 ? x : _mm256_srli_epi16(x, 3), k7);
  }
  const __m256i low = _mm256_and_si256(_mm256_srli_epi16(m == 6 ? a : b, 6), _mm256_set1_epi8(3));
  const __m256i high = _mm256_and_si256(_mm256_srli_epi16(c, m == 6 ? 4 : 5), _mm256_set1_epi8(4));
  return _mm256_or_si256(low, high);
}

// isum[v] += Σ_g sc_g·Σ_16 c·a for one half's rows of Q2_K (qs lines at
// qs_lines, at the half's offset; sc[g]: sub-block g's scale pairs) and the
// V vectors of super-block s. Each step takes sub-blocks 8h + 2j + k for
// kJ = 4/V consecutive j: it shifts its 4 qs lines by the step's bit
// position once, makes each code vector once for every vector, and keeps
// V·kJ = 4 int16 pair sums in registers. The steps stay a loop: unrolled,
// GCC kept the lines live across steps and spilled.
template <size_t V>
HWY_INLINE void Q2Dots(const uint8_t* qs_lines, const __m256i* sc, const QChunk* xc, size_t s, __m256i* isum) {
  constexpr size_t kJ = 4 / V;
  static_assert(kJ >= 1 && V * kJ == 4, "4 pair sums in flight");
  const __m256i k3 = _mm256_set1_epi8(3);
  for (size_t step = 0; step < 16 / kJ; ++step) {
    const size_t h = step / (8 / kJ), k = step / (4 / kJ) % 2, j0 = kJ * (step % (4 / kJ));
    const __m128i q_shift = _mm_cvtsi32_si128(static_cast<int>(2 * j0));  // bits 2j0… of qs at 0
    __m256i pairs[V][kJ];
#pragma GCC unroll 4
    for (size_t l = 0; l < 4; ++l) {
      const __m256i qs = _mm256_srl_epi16(Load256(qs_lines + 64 * (8 * h + 4 * k + l)), q_shift);
#pragma GCC unroll 4
      for (size_t jj = 0; jj < kJ; ++jj) {
        const __m256i w = _mm256_and_si256(jj == 0 ? qs : _mm256_srli_epi16(qs, static_cast<int>(2 * jj)), k3);
#pragma GCC unroll 4
        for (size_t v = 0; v < V; ++v) {
          const __m256i b = _mm256_set1_epi32(LoadU32(xc[v].a[s].qs + 128 * h + 32 * (j0 + jj) + 16 * k + 4 * l));
          const __m256i p = _mm256_maddubs_epi16(w, b);
          pairs[v][jj] = l == 0 ? p : _mm256_add_epi16(pairs[v][jj], p);
        }
      }
    }
#pragma GCC unroll 4
    for (size_t jj = 0; jj < kJ; ++jj) {
      const size_t g = 8 * h + 2 * (j0 + jj) + k;
#pragma GCC unroll 4
      for (size_t v = 0; v < V; ++v) isum[v] = _mm256_add_epi32(isum[v], _mm256_madd_epi16(pairs[v][jj], sc[g]));
    }
  }
}

// The same for Q3_K (code lines at `lines`, at the half's offset): isum[v]
// += Σ_g sc_g·(Σ_16 c·a − 4·bsum_g), the −4·bsum_g taken per int16 lane
// as (2·bsum_g, 2·bsum_g) (pair sums ≤ 4·2·7·127 + 4064). Per triple, each
// sub-block's 4 code vectors are decoded once for the V vectors.
template <size_t V>
HWY_INLINE void Q3Dots(const uint8_t* lines, const __m256i* sc, const QChunk* xc, size_t s, __m256i* isum) {
  for (size_t tri = 0; tri < 8; ++tri) {
    const uint8_t* p = lines + 3 * 64 * tri;
    const __m256i a = Load256(p), b = Load256(p + 64), c = Load256(p + 128);
#pragma GCC unroll 2
    for (size_t k = 0; k < 2; ++k) {
      const size_t g = 2 * tri + k;
      __m256i pairs[V];
#pragma GCC unroll 4
      for (size_t l = 0; l < 4; ++l) {
        const __m256i w = Q3Code(4 * k + l, a, b, c);
#pragma GCC unroll 4
        for (size_t v = 0; v < V; ++v) {
          const __m256i pr = _mm256_maddubs_epi16(w, _mm256_set1_epi32(LoadU32(xc[v].a[s].qs + 16 * g + 4 * l)));
          pairs[v] = l == 0 ? pr : _mm256_add_epi16(pairs[v], pr);
        }
      }
#pragma GCC unroll 4
      for (size_t v = 0; v < V; ++v) {
        const __m256i pr = _mm256_sub_epi16(pairs[v], _mm256_set1_epi32(xc[v].bsum2_pair[s][g]));
        isum[v] = _mm256_add_epi32(isum[v], _mm256_madd_epi16(pr, sc[g]));
      }
    }
  }
}

// sum + S·(d·dx) for one half's 8 rows of super-block sb (its body at
// `body`) and vector x's super-block s; Q2_K also − M·(dmin·dx), M = Σ_g
// min_g·bsum_g from the min nibbles mn4 (HalfScales) and x's min pairs.
template <bool kQ3>
HWY_INLINE __m256 FoldHalf(const uint8_t* group, const uint8_t* body, size_t sb, size_t half, __m256i isum,
                           const __m256i* mn4, const QChunk& x, size_t s, __m256 sum) {
  const float dx = x.a[s].d;
  const __m256 dw = LoadHalves(kQ3 ? group + InterleavedQ3KDOffset(sb) + 16 * half : body + kILQ2DOffset + 16 * half);
  sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), sum);
  if constexpr (!kQ3) {
    const __m256i low_bytes = _mm256_set1_epi32(0x00FF00FF);
    const int32_t* mp = x.min_pairs[s];
    __m256i m = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_and_si256(mn4[k], low_bytes), _mm256_set1_epi32(mp[2 * k])));
      m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_srli_epi16(mn4[k], 8), _mm256_set1_epi32(mp[2 * k + 1])));
    }
    const __m256 dmin = LoadHalves(body + kILQ2DminOffset + 16 * half);
    sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, _mm256_set1_ps(-dx)), sum);
  }
  return sum;
}

// MatVec (V = 1) of Q2_K: both halves of the group per super-block, so the
// group streams once and each broadcast meets 16 rows. On a Zen-1 core a
// 256-bit shift costs as much as a vpmaddubsw (2 cycles, one pipe) and the
// tiles' decode took ~2.25 shifts per vpmaddubsw. Here a qs line gives
// its four code vectors with one shift: j = 0 and 2 as c (bits 0-1 of the
// line and of the line >> 4), j = 1 and 3 in place as 4c (bits 2-3), whose
// int16 pair sums (≤ 4·2·12·127 over the 4 lines) go to their own int32
// sum S4, exactly 4x theirs: S = S1 + S4 / 4.
HWY_NOINLINE void Q2TileMatVec(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc,
                               float* y, size_t row0, size_t valid_rows) {
  constexpr size_t kLines = kILQ2SuperBytes / 64;  // to prefetch per super-block, over the 24 steps l > 0 below
  static_assert(kLines <= 48, "two lines per step at most");
  const __m256i k3 = _mm256_set1_epi8(3), k12 = _mm256_set1_epi8(12);
  __m256 sum[2];
  size_t rows[2];
  LoadHalfSums(y + row0, cb, valid_rows, sum, rows);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* body = group + (cb + s) * kILQ2SuperBytes;
    const char* ahead = StreamAt(group, group_bytes, q23il::SuperBegin(WeightType::kQ2_K, cb),
                                 q23il::SuperBegin(WeightType::kQ2_K, cb + nsb),
                                 q23il::SuperBegin(WeightType::kQ2_K, cb + s) + kStreamPrefetchBytes);
    const uint8_t* qs_lines = body + kILQ2QsOffset;
    __m256i sc[2][16], mn4[2][4];
    for (size_t half = 0; half < 2; ++half) HalfScales<false>(body + kILQ2ScalesOffset + 32 * half, sc[half], mn4[half]);
    const int8_t* a = xc->a[s].qs;
    __m256i s1[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, s4[2] = {s1[0], s1[0]};
    size_t slot = 0;  // steps l > 0 so far: even's chain prefetches line slot, odd's line 24 + slot
#pragma GCC unroll 1
    for (size_t h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (size_t k = 0; k < 2; ++k) {
#pragma GCC unroll 2
        for (size_t jp = 0; jp < 2; ++jp) {  // j = 2jp (codes c) and 2jp + 1 (codes 4c)
          __m256i even[2], odd[2];           // per half
#pragma GCC unroll 4
          for (size_t l = 0; l < 4; ++l) {
            const int8_t* q = a + 128 * h + 64 * jp + 16 * k + 4 * l;
            const __m256i a_even = _mm256_set1_epi32(LoadU32(q)), a_odd = _mm256_set1_epi32(LoadU32(q + 32));
#pragma GCC unroll 2
            for (size_t half = 0; half < 2; ++half) {
              __m256i qs = Load256(qs_lines + 64 * (8 * h + 4 * k + l) + 32 * half);
              if (jp == 1) qs = _mm256_srli_epi16(qs, 4);
              const __m256i pe = _mm256_maddubs_epi16(_mm256_and_si256(qs, k3), a_even);
              const __m256i po = _mm256_maddubs_epi16(_mm256_and_si256(qs, k12), a_odd);
              if (l == 0) {
                even[half] = pe;
                odd[half] = po;
              } else if (half == 0) {
                even[half] = slot < kLines ? AddChain16(even[half], pe, ahead + 64 * slot) : AddChain16(even[half], pe);
                odd[half] = 24 + slot < kLines ? AddChain16(odd[half], po, ahead + 64 * (24 + slot))
                                               : AddChain16(odd[half], po);
              } else {
                even[half] = AddChain16(even[half], pe);
                odd[half] = AddChain16(odd[half], po);
              }
            }
            if (l > 0) ++slot;
          }
          const size_t ge = 8 * h + 4 * jp + k, go = ge + 2;  // sub-blocks 8h + 2j + k
#pragma GCC unroll 2
          for (size_t half = 0; half < 2; ++half) {
            s1[half] = AddChain32(s1[half], _mm256_madd_epi16(even[half], sc[half][ge]));
            s4[half] = AddChain32(s4[half], _mm256_madd_epi16(odd[half], sc[half][go]));
          }
        }
      }
    }
#pragma GCC unroll 2
    for (size_t half = 0; half < 2; ++half) {
      const __m256i isum = _mm256_add_epi32(s1[half], _mm256_srai_epi32(s4[half], 2));  // S4 is exactly 4x
      sum[half] = FoldHalf<false>(group, body, cb + s, half, isum, mn4[half], *xc, s, sum[half]);
    }
  }
  StoreHalfSums(sum, rows, y + row0);
}

// MatVec (V = 1) of Q3_K: both halves per super-block as Q2TileMatVec, one
// triple of re-coded lines (two sub-blocks) at a time: its 8 code vectors
// (Q3Code: 19 operations, where GGUF's bits took ~34) into two int16 pair
// chains, one per sub-block, less (2·bsum_g, 2·bsum_g) per lane.
HWY_NOINLINE void Q3TileMatVec(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc,
                               float* y, size_t row0, size_t valid_rows) {
  // Lines per super-block to prefetch (1760 bytes with its share of the
  // pair's d lines), over the 24 chain steps of half 0 below.
  constexpr size_t kLines = 28;
  static_assert(kLines <= 48, "two lines per step at most");
  __m256 sum[2];
  size_t rows[2];
  LoadHalfSums(y + row0, cb, valid_rows, sum, rows);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* body = group + InterleavedQ3KBodyOffset(cb + s);
    const char* ahead = StreamAt(group, group_bytes, q23il::SuperBegin(WeightType::kQ3_K, cb),
                                 q23il::SuperBegin(WeightType::kQ3_K, cb + nsb),
                                 q23il::SuperBegin(WeightType::kQ3_K, cb + s) + kStreamPrefetchBytes);
    __m256i sc[2][16];
    for (size_t half = 0; half < 2; ++half) HalfScales<true>(body + kILQ3ScalesOffset + 32 * half, sc[half], nullptr);
    const int8_t* a = xc->a[s].qs;
    const int32_t* bsum2 = xc->bsum2_pair[s];
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    size_t slot = 0;  // chain steps of half 0 so far: the first chain prefetches line slot, the second 24 + slot
#pragma GCC unroll 1
    for (size_t tri = 0; tri < 8; ++tri) {
      const uint8_t* lines = body + kILQ3CodesOffset + 3 * 64 * tri;
#pragma GCC unroll 2
      for (size_t half = 0; half < 2; ++half) {
        const uint8_t* p = lines + 32 * half;
        const __m256i la = Load256(p), lb = Load256(p + 64), lc = Load256(p + 128);
        __m256i chain[2];  // sub-blocks 2·tri and 2·tri + 1
#pragma GCC unroll 4
        for (size_t l = 0; l < 4; ++l) {
#pragma GCC unroll 2
          for (size_t k = 0; k < 2; ++k) {
            const __m256i x = _mm256_set1_epi32(LoadU32(a + 32 * tri + 16 * k + 4 * l));
            const __m256i pr = _mm256_maddubs_epi16(Q3Code(4 * k + l, la, lb, lc), x);
            if (l == 0) {
              chain[k] = pr;
            } else if (half == 0) {
              const size_t line = k == 0 ? slot : 24 + slot;
              chain[k] = line < kLines ? AddChain16(chain[k], pr, ahead + 64 * line) : AddChain16(chain[k], pr);
            } else {
              chain[k] = AddChain16(chain[k], pr);
            }
          }
          if (l > 0 && half == 0) ++slot;
        }
#pragma GCC unroll 2
        for (size_t k = 0; k < 2; ++k) {
          const size_t g = 2 * tri + k;
          const __m256i pr = _mm256_sub_epi16(chain[k], _mm256_set1_epi32(bsum2[g]));
          isum[half] = AddChain32(isum[half], _mm256_madd_epi16(pr, sc[half][g]));
        }
      }
    }
#pragma GCC unroll 2
    for (size_t half = 0; half < 2; ++half) {
      sum[half] = FoldHalf<true>(group, body, cb + s, half, isum[half], nullptr, *xc, s, sum[half]);
    }
  }
  StoreHalfSums(sum, rows, y + row0);
}

// As the VNNI tiles, for the MatMul tiles (V ≥ 2; MatVec is Q3TileMatVec
// and Q2TileMatVec) of Q3_K (kQ3) or Q2_K, one half per pass over the
// chunk span: the first pass streams the group (and prefetches), the
// second reads the span (≤ 28 KiB) from cache; each code vector is decoded
// once for the V vectors.
template <bool kQ3, size_t V>
HWY_NOINLINE void Q23Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc,
                          float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  if constexpr (V == 1) {
    if constexpr (kQ3) {
      Q3TileMatVec(group, group_bytes, cb, nsb, xc, y, row0, valid_rows);
    } else {
      Q2TileMatVec(group, group_bytes, cb, nsb, xc, y, row0, valid_rows);
    }
  } else {
    constexpr WeightType kType = kQ3 ? WeightType::kQ3_K : WeightType::kQ2_K;
    for (size_t half = 0; half * kHalfRows < valid_rows; ++half) {
      const size_t first = half * kHalfRows, rows = std::min(kHalfRows, valid_rows - first);
      __m256 sum[V];
#pragma GCC unroll 4
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN float tmp[kHalfRows] = {};
        if (cb > 0) std::copy(y + v * y_stride + row0 + first, y + v * y_stride + row0 + first + rows, tmp);
        sum[v] = _mm256_load_ps(tmp);
      }
      for (size_t s = 0; s < nsb; ++s) {
        if (half == 0) PrefetchAhead(kType, group, group_bytes, cb, nsb, s);
        const size_t off = 32 * half;
        const uint8_t* body = kQ3 ? group + InterleavedQ3KBodyOffset(cb + s) : group + (cb + s) * kILQ2SuperBytes;
        __m256i sc[16], mn4[4];  // sub-block g's scale as (sc, sc) int16 pairs per row (Q3_K: sc − 32); Q2_K's mins
        HalfScales<kQ3>(body + (kQ3 ? kILQ3ScalesOffset : kILQ2ScalesOffset) + off, sc, mn4);
        __m256i isum[V];
#pragma GCC unroll 4
        for (size_t v = 0; v < V; ++v) isum[v] = _mm256_setzero_si256();
        if constexpr (kQ3) {
          Q3Dots<V>(body + kILQ3CodesOffset + off, sc, xc, s, isum);
        } else {
          Q2Dots<V>(body + kILQ2QsOffset + off, sc, xc, s, isum);
        }
#pragma GCC unroll 4
        for (size_t v = 0; v < V; ++v) {
          sum[v] = FoldHalf<kQ3>(group, body, cb + s, half, isum[v], mn4, xc[v], s, sum[v]);
        }
      }
#pragma GCC unroll 4
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN float tmp[kHalfRows];
        _mm256_store_ps(tmp, sum[v]);
        std::copy(tmp, tmp + rows, y + v * y_stride + row0 + first);
      }
    }
  }
}
template <size_t V>
HWY_INLINE void Q3Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc, float* y,
                       size_t y_stride, size_t row0, size_t valid_rows) {
  Q23Tile<true, V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
}
template <size_t V>
HWY_INLINE void Q2Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc, float* y,
                       size_t y_stride, size_t row0, size_t valid_rows) {
  Q23Tile<false, V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
}
#else
// Portable form: each row's super-blocks read back into GGUF bytes, the
// kernels' integer sums computed from them, the same f32 folds.
constexpr size_t kTileVecs = 4;

// Q3_K: S = Σ_g (sc_g − 32)·(Σ c·a − 4·bsum_g), c = q + 4.
HWY_INLINE int32_t Q3Sum(const BlockQ3_K& b, const BlockQ8_K& a) {
  int8_t sc[16];
  UnpackQ3KScales(b.scales, sc);
  int32_t s = 0;
  for (int g = 0; g < 16; ++g) {
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * g + l, h = i / 128, j = (i % 128) / 32, col = i % 32;
      const int c = ((b.qs[32 * h + col] >> (2 * j)) & 3) | ((b.hmask[col] >> (4 * h + j)) & 1) << 2;
      dot += c * a.qs[i];
    }
    s += (sc[g] - 32) * (dot - 4 * a.bsums[g]);
  }
  return s;
}

// Q2_K: S = Σ_g (scales[g] & 15)·Σ q·a; *m = Σ_g (scales[g] >> 4)·bsum_g.
HWY_INLINE int32_t Q2Sum(const BlockQ2_K& b, const BlockQ8_K& a, int32_t* m) {
  int32_t s = 0;
  *m = 0;
  for (int g = 0; g < 16; ++g) {
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * g + l;
      dot += ((b.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3) * a.qs[i];
    }
    s += (b.scales[g] & 15) * dot;
    *m += (b.scales[g] >> 4) * a.bsums[g];
  }
  return s;
}

template <bool kQ3, size_t V>
HWY_NOINLINE void Q23Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc,
                          float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  MatrixView view;  // the group alone, for ReadInterleavedSuperBlock
  view.type = kQ3 ? WeightType::kQ3_K : WeightType::kQ2_K;
  view.data = group;
  view.rows = kInterleaveRows;
  view.cols = (cb + nsb) * kSuperBlock;
  view.layout = WeightLayout::kInterleaved16;
  (void)group_bytes;
  for (size_t r = 0; r < valid_rows; ++r) {
    float acc[V];
    for (size_t v = 0; v < V; ++v) acc[v] = cb == 0 ? 0.0f : y[v * y_stride + row0 + r];
    for (size_t s = 0; s < nsb; ++s) {
      BlockQ3_K b3;
      BlockQ2_K b2;
      if constexpr (kQ3) {
        ReadInterleavedSuperBlock(view, r, cb + s, &b3);
      } else {
        ReadInterleavedSuperBlock(view, r, cb + s, &b2);
      }
      for (size_t v = 0; v < V; ++v) {
        const BlockQ8_K& a = xc[v].a[s];
        if constexpr (kQ3) {
          acc[v] = std::fma(HalfToFloat(b3.d) * a.d, static_cast<float>(Q3Sum(b3, a)), acc[v]);
        } else {
          int32_t m;
          const int32_t isum = Q2Sum(b2, a, &m);
          acc[v] = std::fma(HalfToFloat(b2.d) * a.d, static_cast<float>(isum), acc[v]);
          acc[v] = std::fma(-(HalfToFloat(b2.dmin) * a.d), static_cast<float>(m), acc[v]);
        }
      }
    }
    for (size_t v = 0; v < V; ++v) y[v * y_stride + row0 + r] = acc[v];
  }
}
template <size_t V>
HWY_INLINE void Q3Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc, float* y,
                       size_t y_stride, size_t row0, size_t valid_rows) {
  Q23Tile<true, V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
}
template <size_t V>
HWY_INLINE void Q2Tile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const QChunk* xc, float* y,
                       size_t y_stride, size_t row0, size_t valid_rows) {
  Q23Tile<false, V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
}
#endif

// Q3_K and Q2_K for InterleavedKRows.
struct Q23Format {
  using Chunk = QChunk;
  static constexpr size_t kTile = q23il::kTile, kTileVecs = HWY_NAMESPACE::kTileVecs;
  static_assert(kTileVecs == kTile, "one quantized tile per kernel tile");
  static void Prepare(const float* x, size_t nsb, Chunk* c) { q23il::PrepareChunk(x, nsb, c); }
  template <size_t V>
  static void Tile(const MatrixView& m, const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                   const Chunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
    if (m.type == WeightType::kQ3_K) return Q3Tile<V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
    Q2Tile<V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
  }
};

void Q23RowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  InterleavedKRows<Q23Format>(m, x, n, y, row_begin, row_end);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(Q23RowsT);

void Q23KInterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  if ((w.type != WeightType::kQ3_K && w.type != WeightType::kQ2_K) || w.layout != WeightLayout::kInterleaved16) {
    std::fprintf(stderr, "%s:%d: %s: not an interleaved Q3_K/Q2_K matrix\n", __FILE__, __LINE__,
                 WeightTypeName(w.type));
    std::abort();
  }
  HWY_DYNAMIC_DISPATCH(Q23RowsT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
