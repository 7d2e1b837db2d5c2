// IQ4_XS products in the interleaved layout (WeightLayout::kInterleaved16,
// model_kernels.h), compiled once per Highway target, on Q8_K activations
// (QuantizeRowQ8KFast, matvec_kquant.h).
//
// One row per int32 lane, as matvec_kquant_interleaved.cc does for Q4_K: a
// 64-byte line of qs holds 4 code bytes of each of 16 rows (line v: weights
// 32(v/4) + 4(v%4) + t in its low nibbles, 16 further in its high ones), the
// rows' 6-bit sub-block scales ls are unpacked lane-wise from scales_l (one
// 32-bit word per row) and scales_h (one 16-bit word per row, widened) once
// per sub-block. Per sub-block j of 32 weights and input vector, its 8 code
// vectors go through the IQ4_NL codebook (vpshufb, 16 entries per 128-bit
// lane) and meet the broadcast activation codes:
//   AVX3_DL: unsigned levels u = level + 128 (the codebook xor 0x80) in 8
//     vpdpbusd into an int32 dot per row that starts at −128·Σ_j q_x (the
//     sub-block's activation sum, from bsums), so it is Σ level·q_x
//     (|·| ≤ 32·127²); times the row's ls − 32 (vpmulld), added to S;
//   AVX2 (and AVX3 without VNNI, on 256-bit vectors): vpmaddubsw of |level|
//     against q_x with the level's sign (MatVec: of |q_x|, made once per
//     broadcast for 16 rows, against the level with q_x's sign) (pairs ≤
//     2·127², no saturation, as the rows kernel), each widened by a
//     vpmaddwd against the (ls − 32, ls − 32) int16 pairs into S;
//   the other targets: the same integer sums, row by row (scalar; those
//     targets keep GGUF's rows: InterleavedWeightsPreferred is false).
// S is exact int32, folded per super-block as ref::MatVecRowsQ8K does
// (acc = fma(d·dx, S, acc)), so MatVec, every MatMul tile and the reference
// agree bit for bit.
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simd/half_inline.h"
#include "simd/matvec_iq4xs_interleaved.h"
#include "simd/matvec_kquant.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_iq4xs_interleaved.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "simd/kquant_interleaved_common-inl.h"  // kil::, InterleavedKRows
#include "simd/x86_chain-inl.h"  // PrefetchStreamAhead, StreamAt, kStreamPrefetchBytes

#ifndef KVEDGE_SIMD_MATVEC_IQ4XS_INTERLEAVED_ONCE_
#define KVEDGE_SIMD_MATVEC_IQ4XS_INTERLEAVED_ONCE_
namespace kvedge {
namespace iq4xsil {

// Input vectors quantized at a time; each group's chunk streams once per tile.
constexpr size_t kTile = 8;

// One input vector's Q8_K activations over one chunk, plus per super-block
// −128 × the activation sum of each sub-block of 32 (the AVX3_DL dots' start).
struct XChunk {
  BlockQ8_K a[kil::kChunkSuperBlocks];
  int32_t offset[kil::kChunkSuperBlocks][8];
};

// x: f32 [nsb·256] → c (nsb ≤ kil::kChunkSuperBlocks).
inline void PrepareXChunk(const float* x, size_t nsb, XChunk* c) {
  QuantizeRowQ8KFast(x, c->a, nsb * kSuperBlock);
  for (size_t s = 0; s < nsb; ++s) {
    for (int j = 0; j < 8; ++j) c->offset[s][j] = -128 * (c->a[s].bsums[2 * j] + c->a[s].bsums[2 * j + 1]);
  }
}

}  // namespace iq4xsil
}  // namespace kvedge
#endif  // KVEDGE_SIMD_MATVEC_IQ4XS_INTERLEAVED_ONCE_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

using iq4xsil::XChunk;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// MatVec streams at kStreamPrefetchBytes ahead, batched tiles 4 KiB (as
// matvec_kquant_interleaved.cc's).
template <size_t V>
constexpr size_t kPrefetchAhead = V == 1 ? kStreamPrefetchBytes : 4096;

// Prefetches the lines kAhead bytes past super-block cb + s of the
// group's chunk span [cb, cb + nsb).
template <size_t kAhead>
HWY_INLINE void PrefetchAhead(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, size_t s) {
  PrefetchStreamAhead<kAhead>(group, group_bytes, cb * kILXSuperBytes, (cb + nsb) * kILXSuperBytes,
                              (cb + s) * kILXSuperBytes, (cb + s + 1) * kILXSuperBytes);
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
constexpr size_t kTileVecs = 8;

// y[v·y_stride + row0 + r] (r < valid_rows) for the V vectors xc[0, V) over
// the chunk's super-blocks [cb, cb + nsb) of the group at `group`; the sums
// continue from y when cb > 0 (same order as one pass).
template <size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void XTile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                                            const XChunk* xc, float* y, size_t y_stride, size_t row0,
                                            size_t valid_rows) {
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  __m512 sum[V];
  for (size_t v = 0; v < V; ++v) {
    sum[v] = cb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + v * y_stride + row0);
  }
  const __m512i table = _mm512_xor_si512(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))),
      _mm512_set1_epi8(static_cast<char>(0x80)));  // level + 128
  const __m512i nibble = _mm512_set1_epi8(15), k15 = _mm512_set1_epi32(15), k3 = _mm512_set1_epi32(3);
  const __m512i k32 = _mm512_set1_epi32(32);
  constexpr long long kHighNibble = 0x1020408000000000ll;  // GF(2) affine: bit i ← bit i + 4
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = group + (cb + s) * kILXSuperBytes;
    PrefetchAhead<kPrefetchAhead<V>>(group, group_bytes, cb, nsb, s);
    const __m512i lo = _mm512_load_si512(sb + kILXScalesLOffset);
    const __m512i hi = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + kILXScalesHOffset)));
    __m512i isum[V];
    for (size_t v = 0; v < V; ++v) isum[v] = _mm512_setzero_si512();
    for (size_t j = 0; j < 8; ++j) {
      const unsigned sh = static_cast<unsigned>(j);
      const __m512i sc = _mm512_sub_epi32(
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(lo, 4 * sh), k15),
                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hi, 2 * sh), k3), 4)),
          k32);
      __m512i w[8];  // [k]: low nibbles of line 4j + k, [4 + k]: their high nibbles
      const uint8_t* lines = sb + kILXQsOffset + 256 * j;
      for (size_t k = 0; k < 4; ++k) {
        const __m512i line = _mm512_load_si512(lines + 64 * k);
        w[k] = _mm512_shuffle_epi8(table, _mm512_and_si512(line, nibble));
        w[4 + k] = _mm512_shuffle_epi8(table, _mm512_gf2p8affine_epi64_epi8(line, _mm512_set1_epi64(kHighNibble), 0));
      }
      for (size_t v = 0; v < V; ++v) {
        const int8_t* q = xc[v].a[s].qs + 32 * j;  // weights 32j…: low nibbles, 32j + 16…: high
        __m512i acc = _mm512_set1_epi32(xc[v].offset[s][j]);
        for (size_t k = 0; k < 4; ++k) acc = Dpbusd(acc, w[k], q + 4 * k);
        for (size_t k = 0; k < 4; ++k) acc = Dpbusd(acc, w[4 + k], q + 16 + 4 * k);
        isum[v] = _mm512_add_epi32(isum[v], _mm512_mullo_epi32(acc, sc));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + kILXDOffset)));
    for (size_t v = 0; v < V; ++v) {
      sum[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[v]), _mm512_mul_ps(dw, _mm512_set1_ps(xc[v].a[s].d)), sum[v]);
    }
  }
  for (size_t v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + v * y_stride + row0, mask, sum[v]);
}
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// 8 rows per 256-bit vector: a group is two halves, rows 8h … 8h + 7 at
// byte 32h of every line (and 16h of the 16-bit arrays).
constexpr size_t kTileVecs = 4;
constexpr size_t kHalfRows = 8;

constexpr size_t kXLines = kILXSuperBytes / 64;  // 34 lines a super-block

// A half's 6-bit sub-block scales ls_j as bytes, one row per int32 lane:
// byte b of even[·] is ls_2b, of odd[·] ls_2b+1. scales_l (one 32-bit word
// per row) holds ls_j's low 4 bits as nibble j; scales_h (one 16-bit word
// per row) its high 2 bits at bits 2j: nibble b of it, moved to byte b
// (vpshufb of the word's bytes, then a nibble select), gives bits 4–5 of
// bytes 2b (bits 0–1) and 2b + 1 (bits 2–3).
struct XHalfScales {
  __m256i even, odd;
};
HWY_INLINE XHalfScales LoadXHalfScales(const uint8_t* sb, size_t h) {
  // Row r's word is bytes 2r, 2r + 1 of the half's 16; both 128-bit lanes
  // hold all 16 (rows 0–3 pick from the low lane, 4–7 from the high).
  const __m256i words = _mm256_broadcastsi128_si256(
      _mm_load_si128(reinterpret_cast<const __m128i*>(sb + kILXScalesHOffset + 16 * h)));
  const __m256i spread = _mm256_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7,  //
                                          8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  const __m256i t = _mm256_shuffle_epi8(words, spread);  // bytes (w0, w0, w1, w1) per row
  const __m256i nib = _mm256_or_si256(_mm256_and_si256(t, _mm256_set1_epi32(0x000F000F)),
                                      _mm256_and_si256(_mm256_srli_epi16(t, 4), _mm256_set1_epi32(0x0F000F00)));
  const __m256i lo = Load256(sb + kILXScalesLOffset + 32 * h), k0f = _mm256_set1_epi8(0x0F);
  XHalfScales out;
  out.even = _mm256_or_si256(_mm256_and_si256(lo, k0f),
                             _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi8(0x03)), 4));
  out.odd = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(lo, 4), k0f),
                            _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi8(0x0C)), 2));
  return out;
}

// Sub-block j's scale (ls − 32) of a half's 8 rows as the int16 pair
// (sc, sc) of every lane.
HWY_INLINE __m256i XScalePair(const XHalfScales& ls, size_t j) {
  return _mm256_sub_epi16(_mm256_shuffle_epi8(j % 2 ? ls.odd : ls.even, PairPattern(j / 2)), _mm256_set1_epi16(32));
}

// sc·(|x| · (level with x's sign)) summed in pairs: one code vector's
// int32 contribution (levels: the codebook; nib: the 4-bit indices; ax =
// |x|, made once per broadcast word for both halves; no level is −128, so
// the negated level fits a byte).
HWY_INLINE __m256i XDot(__m256i levels, __m256i nib, __m256i x, __m256i ax, __m256i sc_pair) {
  const __m256i level = _mm256_shuffle_epi8(levels, nib);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(level, x)), sc_pair);
}

// MatVec: both halves per super-block, each code line loaded once for its
// two nibbles and each broadcast activation word meeting both halves; the
// int32 sums in chain order with the prefetches tied to them (5 of the
// super-block's 34 lines per sub-block). On a Zen-1 core this ran ~1.4x
// the half-at-a-time loop the MatMul tiles use.
HWY_NOINLINE void XTileMatVec(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const XChunk* xc,
                              float* y, size_t row0, size_t valid_rows) {
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m256i nibble = _mm256_set1_epi8(15);
  __m256 sum[2];
  size_t rows[2];
  LoadHalfSums(y + row0, cb, valid_rows, sum, rows);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = group + (cb + s) * kILXSuperBytes;
    const char* ahead = StreamAt(group, group_bytes, cb * kILXSuperBytes, (cb + nsb) * kILXSuperBytes,
                                 (cb + s) * kILXSuperBytes + kStreamPrefetchBytes);
    const XHalfScales ls[2] = {LoadXHalfScales(sb, 0), LoadXHalfScales(sb, 1)};
    const int8_t* qs = xc->a[s].qs;
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) {
      const __m256i sc[2] = {XScalePair(ls[0], j), XScalePair(ls[1], j)};
      const uint8_t* lines = sb + kILXQsOffset + 256 * j;
#pragma GCC unroll 4
      for (size_t k = 0; k < 4; ++k) {
        // Weights 32j + 4k…: the low nibbles; 32j + 16 + 4k…: the high.
        const __m256i x_lo = _mm256_set1_epi32(LoadU32(qs + 32 * j + 4 * k));
        const __m256i x_hi = _mm256_set1_epi32(LoadU32(qs + 32 * j + 16 + 4 * k));
        const __m256i ax_lo = _mm256_abs_epi8(x_lo), ax_hi = _mm256_abs_epi8(x_hi);
#pragma GCC unroll 2
        for (size_t h = 0; h < 2; ++h) {
          const __m256i line = Load256(lines + 64 * k + 32 * h);
          const __m256i d_lo = XDot(levels, _mm256_and_si256(line, nibble), x_lo, ax_lo, sc[h]);
          const __m256i d_hi = XDot(levels, _mm256_and_si256(_mm256_srli_epi16(line, 4), nibble), x_hi, ax_hi, sc[h]);
          const size_t l = 5 * j + 2 * k + h;  // this step's line to prefetch, while l < 34 (and 2k + h < 5)
          isum[h] = 2 * k + h < 5 && l < kXLines ? AddChain32(isum[h], d_lo, ahead + 64 * l) : AddChain32(isum[h], d_lo);
          isum[h] = AddChain32(isum[h], d_hi);
        }
      }
    }
    for (size_t h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + kILXDOffset + 16 * h)));
      sum[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(dw, _mm256_set1_ps(xc->a[s].d)), sum[h]);
    }
  }
  StoreHalfSums(sum, rows, y + row0);
}

// As the VNNI XTile, for MatMul tiles of V ≥ 2 vectors, one half per pass,
// each code vector's level and magnitude made once for the V vectors
// (V = 1: XTileMatVec).
template <size_t V>
HWY_NOINLINE void XTile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb, const XChunk* xc,
                        float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  if constexpr (V == 1) {
    XTileMatVec(group, group_bytes, cb, nsb, xc, y, row0, valid_rows);
  } else {
    const __m256i levels =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const __m256i nibble = _mm256_set1_epi8(15);
    for (size_t h = 0; h * kHalfRows < valid_rows; ++h) {
      const size_t first = h * kHalfRows, rows = std::min(kHalfRows, valid_rows - first);
      __m256 sum[V];
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN float tmp[kHalfRows] = {};
        if (cb > 0) std::copy(y + v * y_stride + row0 + first, y + v * y_stride + row0 + first + rows, tmp);
        sum[v] = _mm256_load_ps(tmp);
      }
      for (size_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = group + (cb + s) * kILXSuperBytes;
        if (h == 0) PrefetchAhead<kPrefetchAhead<V>>(group, group_bytes, cb, nsb, s);
        const XHalfScales ls = LoadXHalfScales(sb, h);
        __m256i isum[V];
        for (size_t v = 0; v < V; ++v) isum[v] = _mm256_setzero_si256();
        for (size_t j = 0; j < 8; ++j) {
          const __m256i sc_pair = XScalePair(ls, j);
          const uint8_t* lines = sb + kILXQsOffset + 256 * j + 32 * h;
          for (size_t k = 0; k < 8; ++k) {
            const __m256i line = Load256(lines + 64 * (k % 4));
            const __m256i level = _mm256_shuffle_epi8(
                levels, _mm256_and_si256(k < 4 ? line : _mm256_srli_epi16(line, 4), nibble));
            const __m256i magnitude = _mm256_abs_epi8(level);
            const size_t at = 32 * j + (k < 4 ? 4 * k : 16 + 4 * (k - 4));
            for (size_t v = 0; v < V; ++v) {
              const __m256i qx = _mm256_sign_epi8(_mm256_set1_epi32(LoadU32(xc[v].a[s].qs + at)), level);
              isum[v] = _mm256_add_epi32(isum[v], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, qx), sc_pair));
            }
          }
        }
        const __m256 dw =
            _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + kILXDOffset + 16 * h)));
        for (size_t v = 0; v < V; ++v) {
          sum[v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[v]), _mm256_mul_ps(dw, _mm256_set1_ps(xc[v].a[s].d)), sum[v]);
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
// Portable form: the integer sums row by row from the super-blocks read
// back (the reference's arithmetic), the same f32 folds.
constexpr size_t kTileVecs = 8;

template <size_t V>
HWY_NOINLINE void XTile(const uint8_t* group, size_t /*group_bytes*/, size_t cb, size_t nsb, const XChunk* xc,
                        float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  MatrixView view;  // the group alone, for ReadInterleavedSuperBlock
  view.type = WeightType::kIQ4_XS;
  view.data = group;
  view.rows = kInterleaveRows;
  view.cols = (cb + nsb) * kSuperBlock;
  view.layout = WeightLayout::kInterleaved16;
  for (size_t r = 0; r < valid_rows; ++r) {
    float acc[V];
    for (size_t v = 0; v < V; ++v) acc[v] = cb == 0 ? 0.0f : y[v * y_stride + row0 + r];
    for (size_t s = 0; s < nsb; ++s) {
      BlockIQ4_XS b;
      ReadInterleavedSuperBlock(view, r, cb + s, &b);
      for (size_t v = 0; v < V; ++v) {
        const BlockQ8_K& a = xc[v].a[s];
        int32_t isum = 0;
        for (int j = 0; j < 8; ++j) {
          const int ls = ((b.scales_l[j / 2] >> 4 * (j % 2)) & 15) | (((b.scales_h >> 2 * j) & 3) << 4);
          int32_t dot = 0;
          for (int l = 0; l < 16; ++l) {
            const uint8_t q = b.qs[16 * j + l];
            dot += kIq4nlValues[q & 15] * a.qs[32 * j + l] + kIq4nlValues[q >> 4] * a.qs[32 * j + 16 + l];
          }
          isum += (ls - 32) * dot;
        }
        acc[v] = std::fma(HalfToFloat(b.d) * a.d, static_cast<float>(isum), acc[v]);
      }
    }
    for (size_t v = 0; v < V; ++v) y[v * y_stride + row0 + r] = acc[v];
  }
}
#endif

// IQ4_XS for InterleavedKRows.
struct XFormat {
  using Chunk = XChunk;
  static constexpr size_t kTile = iq4xsil::kTile, kTileVecs = HWY_NAMESPACE::kTileVecs;
  static void Prepare(const float* x, size_t nsb, Chunk* c) { iq4xsil::PrepareXChunk(x, nsb, c); }
  template <size_t V>
  static void Tile(const MatrixView& /*m*/, const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                   const Chunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
    XTile<V>(group, group_bytes, cb, nsb, xc, y, y_stride, row0, valid_rows);
  }
};

void IQ4XSRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  InterleavedKRows<XFormat>(m, x, n, y, row_begin, row_end);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(IQ4XSRowsT);

void IQ4XSInterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin,
                          size_t row_end) {
  if (w.type != WeightType::kIQ4_XS || w.layout != WeightLayout::kInterleaved16) {
    std::fprintf(stderr, "%s:%d: %s: not an interleaved IQ4_XS matrix\n", __FILE__, __LINE__,
                 WeightTypeName(w.type));
    std::abort();
  }
  HWY_DYNAMIC_DISPATCH(IQ4XSRowsT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
