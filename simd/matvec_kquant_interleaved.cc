// Q4_K and Q5_K products in the interleaved layout (WeightLayout::
// kInterleaved16, model_kernels.h), compiled once per Highway target, on Q8_K
// activations (QuantizeRowQ8KFast, matvec_kquant.h). Q5_K is Q4_K's
// super-block with 5-bit codes (0…31) re-coded at repack into the bytes A
// (where Q4_K has its nibbles) and B (model_kernels.h): sub-block 2p's code
// is A & 31, sub-block 2p + 1's is A >> 5 with two bits of B on top; all
// else is Q4_K's, below.
//
// One row per int32 lane, as matvec_interleaved.cc does for the legacy
// 32-blocks: a 64-byte line holds 4 code bytes (8 weights: 4 of sub-block
// 2k, 4 of 2k + 1) of each of 16 rows, and the 12 packed scale bytes of the
// 16 rows are 3 lines, unpacked lane-wise by ggml's 32-bit word operations
// once per super-block. Per sub-block j of 32 weights and input vector, the
// 8 code vectors of its nibbles meet the broadcast activation codes:
//   AVX3_DL: 8 vpdpbusd into an int32 dot per row, times the row's scale
//     (vpmulld), added to S;
//   AVX2 (and AVX3 without VNNI, on 256-bit vectors): 8 vpmaddubsw summed in
//     int16 (pairs ≤ 2·15·127, 8 of them ≤ 30480; Q5_K's ≤ 2·31·128, 4 of
//     them ≤ 31744), then one vpmaddwd against the (scale, scale) int16
//     pairs adds sc·dot to S; the MatMul tiles on a CPU with AVX-VNNI
//     (Alder Lake and later, Zen 5) do as AVX3_DL on 256-bit vectors;
//   the other targets: the same integer sums, row by row (scalar; those
//     targets keep GGUF's rows: InterleavedWeightsPreferred is false).
// M = Σ_j min_j·(Σ codes of sub-block j) is 4 int16 pair multiply-adds of
// the rows' mins against the activations' per-32 sums. S and M are exact
// int32, folded per super-block as ref::MatVecRowsQ8K does, so MatVec,
// every MatMul tile and the reference agree bit for bit.
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "platform/target_report.h"  // AvxVnniEnabled
#include "simd/half_inline.h"
#include "simd/matvec_kquant.h"
#include "simd/matvec_kquant_interleaved.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_kquant_interleaved.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "simd/kquant_interleaved_common-inl.h"  // kil::, InterleavedKRows
#include "simd/x86_chain-inl.h"  // PrefetchStreamAhead, StreamAt, kStreamPrefetchBytes

#ifndef KVEDGE_SIMD_MATVEC_KQUANT_INTERLEAVED_ONCE_
#define KVEDGE_SIMD_MATVEC_KQUANT_INTERLEAVED_ONCE_
namespace kvedge {
namespace kq4il {

// Input vectors quantized at a time; each group streams once per tile.
constexpr size_t kTile = 8;

// One input vector's Q8_K activations over one chunk, plus per super-block
// the sums over each sub-block of 32 as int16 pairs in the order the mins
// meet them: (s0, s2), (s1, s3), (s4, s6), (s5, s7).
struct KChunk {
  BlockQ8_K a[kil::kChunkSuperBlocks];
  int32_t min_pairs[kil::kChunkSuperBlocks][4];
};

// x: f32 [nsb·256] → c (nsb ≤ kil::kChunkSuperBlocks).
inline void PrepareKChunk(const float* x, size_t nsb, KChunk* c) {
  QuantizeRowQ8KFast(x, c->a, nsb * kSuperBlock);
  for (size_t s = 0; s < nsb; ++s) {
    int s32[8];  // |Σ| ≤ 32·127: int16
    for (int j = 0; j < 8; ++j) s32[j] = c->a[s].bsums[2 * j] + c->a[s].bsums[2 * j + 1];
    c->min_pairs[s][0] = kil::PackPair(s32[0], s32[2]);
    c->min_pairs[s][1] = kil::PackPair(s32[1], s32[3]);
    c->min_pairs[s][2] = kil::PackPair(s32[4], s32[6]);
    c->min_pairs[s][3] = kil::PackPair(s32[5], s32[7]);
  }
}

}  // namespace kq4il
}  // namespace kvedge
#endif  // KVEDGE_SIMD_MATVEC_KQUANT_INTERLEAVED_ONCE_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

using kq4il::KChunk;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// MatVec streams at kStreamPrefetchBytes ahead. Under load 10-15 (CPU time
// per 32000x2048 MatVec, il16 / rows in the same run) none 1.09/0.93x,
// 8 KiB 0.65x, 16 KiB 0.82x on AVX3_DL; on AVX2 none 2.3x, 8 KiB 0.88x,
// 16 KiB 0.67x: a quiet re-measure is due. Batched tiles spend V× longer
// per line: 4 KiB ahead (as matvec_interleaved.cc's).
template <size_t V>
constexpr size_t kPrefetchAhead = V == 1 ? kStreamPrefetchBytes : 4096;

// Prefetches the lines kAhead bytes past super-block cb + s of the
// group's chunk span [cb, cb + nsb) (super-blocks of kSuper bytes).
template <size_t kSuper, size_t kAhead>
HWY_INLINE void PrefetchAhead(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, size_t s) {
  PrefetchStreamAhead<kAhead>(group, group_bytes, cb * kSuper, (cb + nsb) * kSuper, (cb + s) * kSuper,
                              (cb + s + 1) * kSuper);
}
#endif

// Bytes of a 16-row super-block: Q4_K, or Q5_K (kQ5: + its B bytes).
template <bool kQ5>
constexpr size_t kSuperBytes = kQ5 ? kILQ5SuperBytes : InterleavedKSuperBytes;

#if HWY_TARGET == HWY_AVX3_DL
constexpr size_t kTileVecs = 8;

// y[v·y_stride + row0 + r] (r < valid_rows) for the V vectors xc[0, V)
// (consecutive: one base register addresses them all) over the chunk's
// super-blocks [cb, cb + nsb) of the Q4_K (Q5_K: kQ5) group at `group`;
// the sums continue from y when cb > 0 (same order as one pass).
template <bool kQ5, size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void KTile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                                            const KChunk* xc, float* y, size_t y_stride, size_t row0,
                                            size_t valid_rows) {
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  __m512 sum[V];
  for (size_t v = 0; v < V; ++v) {
    sum[v] = cb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + v * y_stride + row0);
  }
  const __m512i k3f = _mm512_set1_epi32(0x3f3f3f3f), k0f = _mm512_set1_epi32(0x0f0f0f0f);
  const __m512i k03 = _mm512_set1_epi32(0x03030303), nibble = _mm512_set1_epi8(15);
  const __m512i low_bytes = _mm512_set1_epi32(0x00FF00FF), byte = _mm512_set1_epi32(0xFF);
  constexpr long long kHighNibble = 0x1020408000000000ll;  // GF(2) affine: bit i ← bit i + 4
  constexpr long long kHighCode = 0x2040800000000000ll;    // Q5_K's A: bit i ← bit i + 5 (i < 3)
  const __m512i k1f = _mm512_set1_epi8(31);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = group + (cb + s) * kSuperBytes<kQ5>;
    PrefetchAhead<kSuperBytes<kQ5>, kPrefetchAhead<V>>(group, group_bytes, cb, nsb, s);
    // ggml's scale/min unpacking (UnpackScalesMins in matvec_kquant.cc), one row per lane.
    const __m512i u0 = _mm512_load_si512(sb + kILKScalesOffset);
    const __m512i u1 = _mm512_load_si512(sb + kILKScalesOffset + 64);
    const __m512i u2 = _mm512_load_si512(sb + kILKScalesOffset + 128);
    const __m512i sc03 = _mm512_and_si512(u0, k3f);
    const __m512i sc47 = _mm512_or_si512(_mm512_and_si512(u2, k0f),
                                         _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), k03), 4));
    const __m512i mn03 = _mm512_and_si512(u1, k3f);
    const __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), k0f),
                                         _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), k03), 4));
    __m512i isum[V];
    for (size_t v = 0; v < V; ++v) isum[v] = _mm512_setzero_si512();
    for (size_t j = 0; j < 8; ++j) {
      const __m512i sc = _mm512_and_si512(_mm512_srli_epi32(j < 4 ? sc03 : sc47, static_cast<unsigned>(8 * (j % 4))), byte);
      __m512i w[8];
      const uint8_t* lines = sb + kILKCodesOffset + 64 * 8 * (j / 2);
      for (size_t i = 0; i < 8; ++i) {
        const __m512i line = _mm512_load_si512(lines + 64 * i);
        if constexpr (kQ5) {
          if (j & 1) {
            // A >> 5, with bits j - 1 and j of B's line i as bits 3 and 4 (GF(2) affine).
            const __m512i b = _mm512_load_si512(sb + kILQ5BOffset + 64 * i);
            const auto to34 = static_cast<long long>((1ull << (j - 1)) << 32 | (1ull << j) << 24);
            w[i] = _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(line, _mm512_set1_epi64(kHighCode), 0),
                                   _mm512_gf2p8affine_epi64_epi8(b, _mm512_set1_epi64(to34), 0));
          } else {
            w[i] = _mm512_and_si512(line, k1f);
          }
        } else {
          w[i] = (j & 1) ? _mm512_gf2p8affine_epi64_epi8(line, _mm512_set1_epi64(kHighNibble), 0)
                         : _mm512_and_si512(line, nibble);
        }
      }
      for (size_t v = 0; v < V; ++v) {
        const int8_t* q = xc[v].a[s].qs + 32 * j;  // weights 32j…: low nibbles of 64(j/2)…, high of +32
        __m512i acc = _mm512_setzero_si512();
        for (size_t i = 0; i < 8; ++i) acc = Dpbusd(acc, w[i], q + 4 * i);
        isum[v] = _mm512_add_epi32(isum[v], _mm512_mullo_epi32(acc, sc));
      }
    }
    const __m512i m02 = _mm512_and_si512(mn03, low_bytes), m13 = _mm512_srli_epi16(mn03, 8);
    const __m512i m46 = _mm512_and_si512(mn47, low_bytes), m57 = _mm512_srli_epi16(mn47, 8);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + kILKDOffset)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + kILKDminOffset)));
    for (size_t v = 0; v < V; ++v) {
      const int32_t* mp = xc[v].min_pairs[s];
      __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m02, _mm512_set1_epi32(mp[0]));
      m = _mm512_dpwssd_epi32(m, m13, _mm512_set1_epi32(mp[1]));
      m = _mm512_dpwssd_epi32(m, m46, _mm512_set1_epi32(mp[2]));
      m = _mm512_dpwssd_epi32(m, m57, _mm512_set1_epi32(mp[3]));
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
constexpr size_t kTileVecs = 4;  // 16 ymm: 4 int16 chains, 4 int32 sums, temps
constexpr size_t kHalfRows = 8;

// A half's 6-bit scales and mins as ggml packs them (UnpackScalesMins in
// matvec_kquant.cc), one row per int32 lane: bytes j of sc03/mn03 are
// sub-block j's scale/min, of sc47/mn47 sub-block 4 + j's.
struct HalfScales {
  __m256i sc03, sc47, mn03, mn47;
};
HWY_INLINE HalfScales UnpackHalfScales(const uint8_t* sb, size_t h) {
  const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
  const __m256i k03 = _mm256_set1_epi32(0x03030303);
  const __m256i u0 = Load256(sb + kILKScalesOffset + 32 * h);
  const __m256i u1 = Load256(sb + kILKScalesOffset + 64 + 32 * h);
  const __m256i u2 = Load256(sb + kILKScalesOffset + 128 + 32 * h);
  HalfScales r;
  r.sc03 = _mm256_and_si256(u0, k3f);
  r.sc47 = _mm256_or_si256(_mm256_and_si256(u2, k0f),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k03), 4));
  r.mn03 = _mm256_and_si256(u1, k3f);
  r.mn47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k03), 4));
  return r;
}

// Sub-block j's scale as the int16 pair (sc, sc) of every row lane (pattern:
// PairPattern(j % 4)).
HWY_INLINE __m256i SubBlockScale(const HalfScales& hs, size_t j, __m256i pattern) {
  return _mm256_shuffle_epi8(j < 4 ? hs.sc03 : hs.sc47, pattern);
}

// Σ_j min_j·(Σ codes of sub-block j) of a half's rows (one per int32 lane)
// for one input vector's super-block (min_pairs: its sums, mp).
HWY_INLINE __m256i MinSums(const HalfScales& hs, const int32_t* mp) {
  const __m256i low_bytes = _mm256_set1_epi32(0x00FF00FF);
  const __m256i m02 = _mm256_and_si256(hs.mn03, low_bytes), m13 = _mm256_srli_epi16(hs.mn03, 8);
  const __m256i m46 = _mm256_and_si256(hs.mn47, low_bytes), m57 = _mm256_srli_epi16(hs.mn47, 8);
  __m256i m = _mm256_add_epi32(_mm256_madd_epi16(m02, _mm256_set1_epi32(mp[0])),
                               _mm256_madd_epi16(m13, _mm256_set1_epi32(mp[1])));
  m = _mm256_add_epi32(m, _mm256_madd_epi16(m46, _mm256_set1_epi32(mp[2])));
  return _mm256_add_epi32(m, _mm256_madd_epi16(m57, _mm256_set1_epi32(mp[3])));
}

// sum += d·dx·isum − dmin·dx·m for half h of super-block sb and one input
// vector's super-block (m: MinSums).
HWY_INLINE __m256 FoldHalf(const uint8_t* sb, size_t h, __m256i isum, __m256i m, float dx, __m256 sum) {
  const __m256 dw = LoadHalves(sb + kILKDOffset + 16 * h);
  const __m256 dmin = LoadHalves(sb + kILKDminOffset + 16 * h);
  sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), sum);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, _mm256_set1_ps(-dx)), sum);
}

// Q5_K's code bytes of pair p (sub-blocks 2p, 2p + 1) as codes: A & 31, and
// A >> 5 with bits 2p, 2p + 1 of B as bits 3, 4 (16-bit shifts: what
// crosses a byte boundary is masked off).
HWY_INLINE __m256i Q5LowCodes(__m256i a) { return _mm256_and_si256(a, _mm256_set1_epi8(31)); }
HWY_INLINE __m256i Q5HighCodes(__m256i a, __m256i b, size_t p) {
  const __m256i b34 = p == 0   ? _mm256_slli_epi16(b, 3)
                      : p == 1 ? _mm256_slli_epi16(b, 1)
                      : p == 2 ? _mm256_srli_epi16(b, 1)
                               : _mm256_srli_epi16(b, 3);
  return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 5), _mm256_set1_epi8(7)),
                         _mm256_and_si256(b34, _mm256_set1_epi8(0x18)));
}

// One pair p of a super-block for Q4_K MatVec: sub-blocks 2p and 2p + 1 are
// the low and high nibbles of the same 8 lines, each line loaded once for
// both; the four int16 sums (2 sub-blocks × 2 halves) are independent
// chains. `ahead`: the stream's 9 lines for this pair, one per k on lo0's
// chain, the ninth on hi0's.
template <size_t p>
HWY_INLINE void Q4PairMatVec(const uint8_t* sb, const int8_t* qs, const HalfScales& hs0, const HalfScales& hs1,
                             const char* ahead, __m256i& isum0, __m256i& isum1) {
  const __m256i nibble = _mm256_set1_epi8(15);
  const uint8_t* lines = sb + kILKCodesOffset + 64 * 8 * p;
  const int8_t* q = qs + 64 * p;  // weights 64p…: low nibbles; 64p + 32…: high
  __m256i lo0 = _mm256_setzero_si256(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
#pragma GCC unroll 8
  for (size_t k = 0; k < 8; ++k) {
    const __m256i a_lo = _mm256_set1_epi32(LoadU32(q + 4 * k));
    const __m256i a_hi = _mm256_set1_epi32(LoadU32(q + 32 + 4 * k));
    const __m256i l0 = Load256(lines + 64 * k), l1 = Load256(lines + 64 * k + 32);
    lo0 = AddChain16(lo0, _mm256_maddubs_epi16(_mm256_and_si256(l0, nibble), a_lo), ahead + 64 * k);
    hi0 = k == 0 ? AddChain16(hi0, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(l0, 4), nibble), a_hi),
                              ahead + 64 * 8)
                 : AddChain16(hi0, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(l0, 4), nibble), a_hi));
    lo1 = AddChain16(lo1, _mm256_maddubs_epi16(_mm256_and_si256(l1, nibble), a_lo));
    hi1 = AddChain16(hi1, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(l1, 4), nibble), a_hi));
  }
  const __m256i pat_lo = PairPattern((2 * p) % 4), pat_hi = PairPattern((2 * p + 1) % 4);
  isum0 = _mm256_add_epi32(isum0, _mm256_add_epi32(_mm256_madd_epi16(lo0, SubBlockScale(hs0, 2 * p, pat_lo)),
                                                   _mm256_madd_epi16(hi0, SubBlockScale(hs0, 2 * p + 1, pat_hi))));
  isum1 = _mm256_add_epi32(isum1, _mm256_add_epi32(_mm256_madd_epi16(lo1, SubBlockScale(hs1, 2 * p, pat_lo)),
                                                   _mm256_madd_epi16(hi1, SubBlockScale(hs1, 2 * p + 1, pat_hi))));
}

// The same for Q5_K: the codes from A and B (Q5LowCodes, Q5HighCodes), and
// the int16 chains run 4 lines (≤ 4·2·31·128 = 31744) before their vpmaddwd
// into the int32 sums. `ahead`: the stream's 11 lines for this pair, one
// per k on lo0's chains and three on hi0's.
template <size_t p>
HWY_INLINE void Q5PairMatVec(const uint8_t* sb, const int8_t* qs, const HalfScales& hs0, const HalfScales& hs1,
                             const char* ahead, __m256i& isum0, __m256i& isum1) {
  const uint8_t* lines = sb + kILKCodesOffset + 64 * 8 * p;
  const uint8_t* bits = sb + kILQ5BOffset;
  const int8_t* q = qs + 64 * p;
  const __m256i pat_lo = PairPattern((2 * p) % 4), pat_hi = PairPattern((2 * p + 1) % 4);
#pragma GCC unroll 2
  for (size_t k0 = 0; k0 < 8; k0 += 4) {
    __m256i lo0 = _mm256_setzero_si256(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
#pragma GCC unroll 4
    for (size_t k = k0; k < k0 + 4; ++k) {
      const __m256i a_lo = _mm256_set1_epi32(LoadU32(q + 4 * k));
      const __m256i a_hi = _mm256_set1_epi32(LoadU32(q + 32 + 4 * k));
      const __m256i l0 = Load256(lines + 64 * k), b0 = Load256(bits + 64 * k);
      lo0 = AddChain16(lo0, _mm256_maddubs_epi16(Q5LowCodes(l0), a_lo), ahead + 64 * k);
      hi0 = k < 3 ? AddChain16(hi0, _mm256_maddubs_epi16(Q5HighCodes(l0, b0, p), a_hi), ahead + 64 * (8 + k))
                  : AddChain16(hi0, _mm256_maddubs_epi16(Q5HighCodes(l0, b0, p), a_hi));
      const __m256i l1 = Load256(lines + 64 * k + 32), b1 = Load256(bits + 64 * k + 32);
      lo1 = AddChain16(lo1, _mm256_maddubs_epi16(Q5LowCodes(l1), a_lo));
      hi1 = AddChain16(hi1, _mm256_maddubs_epi16(Q5HighCodes(l1, b1, p), a_hi));
    }
    isum0 = AddChain32(isum0, _mm256_add_epi32(_mm256_madd_epi16(lo0, SubBlockScale(hs0, 2 * p, pat_lo)),
                                               _mm256_madd_epi16(hi0, SubBlockScale(hs0, 2 * p + 1, pat_hi))));
    isum1 = AddChain32(isum1, _mm256_add_epi32(_mm256_madd_epi16(lo1, SubBlockScale(hs1, 2 * p, pat_lo)),
                                               _mm256_madd_epi16(hi1, SubBlockScale(hs1, 2 * p + 1, pat_hi))));
  }
}

// MatVec: both halves of the group per super-block, so the group streams
// once and each broadcast activation word meets both halves' codes, pair
// by pair (Q4PairMatVec, Q5PairMatVec). On a Zen-1 core this ran 1.7x the
// sub-block-at-a-time loop the MatMul tiles use (Q4_K, L3-resident matrix).
template <bool kQ5>
HWY_NOINLINE void KTileMatVec(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const KChunk* xc,
                              float* y, size_t row0, size_t valid_rows) {
  constexpr size_t kSuper = kSuperBytes<kQ5>, kPairLines = kQ5 ? 11 : 9;
  // The stream kStreamPrefetchBytes ahead: the super-block's lines from one
  // address (lines past a span's end may be the wrong ones: a prefetch is
  // only a hint), kPairLines per pair p. The per-line StreamAt loop cost a
  // quarter of the kernel's time on a Zen-1 core.
  static_assert(kSuper == 4 * kPairLines * 64, "kPairLines lines per pair p");
  __m256 sum[2];
  size_t rows[2];
  LoadHalfSums(y + row0, cb, valid_rows, sum, rows);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = group + (cb + s) * kSuper;
    const char* ahead = StreamAt(group, group_bytes, cb * kSuper, (cb + nsb) * kSuper, (cb + s) * kSuper +
                                 kStreamPrefetchBytes);
    const HalfScales hs0 = UnpackHalfScales(sb, 0), hs1 = UnpackHalfScales(sb, 1);
    // The mins' sums first: only the scales stay live through the pairs.
    const __m256i m0 = MinSums(hs0, xc->min_pairs[s]), m1 = MinSums(hs1, xc->min_pairs[s]);
    const int8_t* qs = xc->a[s].qs;
    __m256i isum0 = _mm256_setzero_si256(), isum1 = _mm256_setzero_si256();
    if constexpr (kQ5) {
      Q5PairMatVec<0>(sb, qs, hs0, hs1, ahead, isum0, isum1);
      Q5PairMatVec<1>(sb, qs, hs0, hs1, ahead + 64 * kPairLines, isum0, isum1);
      Q5PairMatVec<2>(sb, qs, hs0, hs1, ahead + 2 * 64 * kPairLines, isum0, isum1);
      Q5PairMatVec<3>(sb, qs, hs0, hs1, ahead + 3 * 64 * kPairLines, isum0, isum1);
    } else {
      Q4PairMatVec<0>(sb, qs, hs0, hs1, ahead, isum0, isum1);
      Q4PairMatVec<1>(sb, qs, hs0, hs1, ahead + 64 * kPairLines, isum0, isum1);
      Q4PairMatVec<2>(sb, qs, hs0, hs1, ahead + 2 * 64 * kPairLines, isum0, isum1);
      Q4PairMatVec<3>(sb, qs, hs0, hs1, ahead + 3 * 64 * kPairLines, isum0, isum1);
    }
    sum[0] = FoldHalf(sb, 0, isum0, m0, xc->a[s].d, sum[0]);
    sum[1] = FoldHalf(sb, 1, isum1, m1, xc->a[s].d, sum[1]);
  }
  StoreHalfSums(sum, rows, y + row0);
}

// As the VNNI KTile, for MatMul tiles of V ≥ 2 vectors: one half per pass,
// each code line unpacked once for the V vectors (V = 1: KTileMatVec).
// kVnni (AVX2 with AVX-VNNI, AvxVnniEnabled()): as AVX3_DL, the 8 lines of
// a sub-block go into an int32 dot per row by vpdpbusd (DpbusdAvxVnni), then
// times the row's scale (vpmulld) into S: 10 operations per sub-block and
// vector where vpmaddubsw's int16 chain takes 17 (Q5_K 18). The sums are
// the same exact integers, so the result is the same bit for bit. Zen 5,
// KVEDGE_SIMD=AVX2_VNNI, new ÷ old: MatMul/q4_k.il16/2048x2048 batch 2
// 0.87x, batch 8 0.98x; q5_k 0.86x, 0.90x (docs/model-kernels.md).
template <bool kQ5, size_t V, bool kVnni = false>
HWY_NOINLINE void KTile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const KChunk* xc,
                        float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  if constexpr (V == 1) {
    KTileMatVec<kQ5>(group, group_bytes, cb, nsb, xc, y, row0, valid_rows);
  } else {
    const __m256i nibble = _mm256_set1_epi8(15);
    const __m256i byte = _mm256_set1_epi32(0xFF);
    for (size_t h = 0; h * kHalfRows < valid_rows; ++h) {
      const size_t first = h * kHalfRows, rows = std::min(kHalfRows, valid_rows - first);
      __m256 sum[V];
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN float tmp[kHalfRows] = {};
        if (cb > 0) std::copy(y + v * y_stride + row0 + first, y + v * y_stride + row0 + first + rows, tmp);
        sum[v] = _mm256_load_ps(tmp);
      }
      for (size_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = group + (cb + s) * kSuperBytes<kQ5>;
        if (h == 0) PrefetchAhead<kSuperBytes<kQ5>, kPrefetchAhead<V>>(group, group_bytes, cb, nsb, s);
        const HalfScales hs = UnpackHalfScales(sb, h);
        __m256i isum[V];
        for (size_t v = 0; v < V; ++v) isum[v] = _mm256_setzero_si256();
        // Sub-block by sub-block, each code vector unpacked once for the V
        // vectors, the int16 sums in chain order (V accumulators: with both
        // nibbles of a line at once, 2V of them spilled at V = 4), kPerSum
        // lines per vpmaddwd.
        // With AVX-VNNI the lines' dots add up in int32 (8 lines ≤ 8·4·31·128).
        constexpr size_t kPerSum = kQ5 && !kVnni ? 4 : 8;
#pragma GCC unroll 8
        for (size_t j = 0; j < 8; ++j) {
          const uint8_t* lines = sb + kILKCodesOffset + 64 * 8 * (j / 2) + 32 * h;
          // (sc, sc) int16 pairs for vpmaddwd, or sc in each int32 lane for vpmulld.
          const __m256i sc = kVnni ? _mm256_and_si256(_mm256_srli_epi32(j < 4 ? hs.sc03 : hs.sc47,
                                                                        static_cast<int>(8 * (j % 4))), byte)
                                   : SubBlockScale(hs, j, PairPattern(j % 4));
          __m256i pairs[V];  // [v] the int16 chain, or (kVnni) the int32 dot
#pragma GCC unroll 8
          for (size_t k = 0; k < 8; ++k) {
            const __m256i line = Load256(lines + 64 * k);
            __m256i w;
            if constexpr (kQ5) {
              w = j % 2 ? Q5HighCodes(line, Load256(sb + kILQ5BOffset + 64 * k + 32 * h), j / 2) : Q5LowCodes(line);
            } else {
              w = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(line, 4) : line, nibble);
            }
#pragma GCC unroll 8
            for (size_t v = 0; v < V; ++v) {
              const __m256i x = _mm256_set1_epi32(LoadU32(xc[v].a[s].qs + 32 * j + 4 * k));
              if constexpr (kVnni) {
                pairs[v] = DpbusdAvxVnni(k == 0 ? _mm256_setzero_si256() : pairs[v], w, x);
                if (k == 7) isum[v] = AddChain32(isum[v], _mm256_mullo_epi32(pairs[v], sc));
              } else {
                const __m256i dot = _mm256_maddubs_epi16(w, x);
                pairs[v] = k % kPerSum == 0 ? dot : AddChain16(pairs[v], dot);
                if (k % kPerSum == kPerSum - 1) isum[v] = AddChain32(isum[v], _mm256_madd_epi16(pairs[v], sc));
              }
            }
          }
        }
        for (size_t v = 0; v < V; ++v) {
          sum[v] = FoldHalf(sb, h, isum[v], MinSums(hs, xc[v].min_pairs[s]), xc[v].a[s].d, sum[v]);
        }
      }
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN float tmp[kHalfRows];
        _mm256_store_ps(tmp, sum[v]);
        std::copy(tmp, tmp + rows, y + v * y_stride + row0 + first);
      }
    }
  }
}
#else
// Portable form: the integer sums row by row from the layout (the
// reference's arithmetic), the same f32 folds.
constexpr size_t kTileVecs = 8;

template <bool kQ5, size_t V>
HWY_NOINLINE void KTile(const uint8_t* group, size_t /*group_bytes*/, size_t cb, size_t nsb, const KChunk* xc,
                        float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  for (size_t r = 0; r < valid_rows; ++r) {
    float acc[V];
    for (size_t v = 0; v < V; ++v) acc[v] = cb == 0 ? 0.0f : y[v * y_stride + row0 + r];
    for (size_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = group + (cb + s) * kSuperBytes<kQ5>;
      uint16_t d, dmin;
      std::memcpy(&d, sb + kILKDOffset + 2 * r, 2);
      std::memcpy(&dmin, sb + kILKDminOffset + 2 * r, 2);
      uint8_t packed[12], sc[8], mn[8];
      for (size_t k = 0; k < 3; ++k) std::memcpy(packed + 4 * k, sb + kILKScalesOffset + 64 * k + 4 * r, 4);
      for (int j = 0; j < 8; ++j) KScaleMin(j, packed, &sc[j], &mn[j]);
      const float dw = HalfToFloat(d), dm = HalfToFloat(dmin);
      for (size_t v = 0; v < V; ++v) {
        const BlockQ8_K& a = xc[v].a[s];
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t dot = 0;
          for (int l = 0; l < 32; ++l) {
            // weight 32j + l: byte 32(j/2) + l of the row's qs, nibble j % 2
            const size_t byte = 32 * (j / 2) + l;
            const uint8_t code = sb[kILKCodesOffset + 64 * (byte / 4) + 4 * r + byte % 4];
            int w = (code >> (4 * (j % 2))) & 15;
            if (kQ5) {
              // A & 31, or A >> 5 with bits j − 1, j of B[l] on top
              const uint8_t b = sb[kILQ5BOffset + 64 * (l / 4) + 4 * r + l % 4];
              w = j % 2 ? code >> 5 | (b >> (j - 1) & 3) << 3 : code & 31;
            }
            dot += w * a.qs[32 * j + l];
          }
          isum += sc[j] * dot;
          msum += mn[j] * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
        }
        acc[v] = std::fma(dw * a.d, static_cast<float>(isum), acc[v]);
        acc[v] = std::fma(-(dm * a.d), static_cast<float>(msum), acc[v]);
      }
    }
    for (size_t v = 0; v < V; ++v) y[v * y_stride + row0 + r] = acc[v];
  }
}
#endif

// Q4_K (Q5_K: kQ5) for InterleavedKRows.
template <bool kQ5>
struct KFormat {
  using Chunk = KChunk;
  static constexpr size_t kTile = kq4il::kTile, kTileVecs = HWY_NAMESPACE::kTileVecs;
  static void Prepare(const float* x, size_t nsb, Chunk* c) { kq4il::PrepareKChunk(x, nsb, c); }
  template <size_t V>
  static void Tile(const MatrixView& /*m*/, const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                   const Chunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
#if HWY_TARGET == HWY_AVX2
    if (V > 1 && AvxVnniEnabled()) {
      return KTile<kQ5, V, true>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
    }
#endif
    KTile<kQ5, V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
  }
};

void KILRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  if (m.type == WeightType::kQ5_K) return InterleavedKRows<KFormat<true>>(m, x, n, y, row_begin, row_end);
  InterleavedKRows<KFormat<false>>(m, x, n, y, row_begin, row_end);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(KILRowsT);

void KQuantInterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin,
                           size_t row_end) {
  if ((w.type != WeightType::kQ4_K && w.type != WeightType::kQ5_K) || w.layout != WeightLayout::kInterleaved16) {
    std::fprintf(stderr, "%s:%d: %s: not an interleaved Q4_K/Q5_K matrix\n", __FILE__, __LINE__,
                 WeightTypeName(w.type));
    std::abort();
  }
  HWY_DYNAMIC_DISPATCH(KILRowsT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
