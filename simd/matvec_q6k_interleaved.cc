// Q6_K products in the interleaved layout (WeightLayout::kInterleaved16,
// model_kernels.h), compiled once per Highway target, on Q8_K activations
// (QuantizeRowQ8KFast, matvec_kquant.h); matvec_kquant_interleaved.cc's
// scheme for Q4_K, with Q6_K's codes.
//
// One row per int32 lane: a 64-byte line holds 4 code bytes A (or 4 B) of
// each of 16 rows, the codes re-coded at repack (model_kernels.h). Weight
// 128h + 32q + 16k + 4t + b (h, k < 2; q < 4; t < 4) of a row has its code
// in A byte 64h + 32(q%2) + 16k + 4t + b: the low 6 bits for q < 2, the top
// two bits for q ≥ 2 with nibble q − 2 of B byte 32h + 16k + 4t + b below
// them; scale g = 8h + 2q + k covers the 16 weights of (h, q, k): 4 A lines
// (and for q ≥ 2 4 B lines) give the 16 rows' unsigned codes 0…63 of group
// g, which meet the broadcast activation codes:
//   AVX3_DL: 4 vpdpbusd from −32·bsum_g (so the dot is Σ (q − 32)·q_x),
//     times the row's sign-extended scale (vpmulld), added to S;
//   AVX2 (and AVX3 without VNNI, on 256-bit vectors): 4 vpmaddubsw summed
//     in int16 by twos (pairs ≤ 2·63·128, 2 of them ≤ 32256), two vpmaddwd
//     against the (scale, scale) int16 pairs add sc·Σ q·q_x to S, and per
//     super-block 8 vpmaddwd of the rows' scales against the activations'
//     bsums subtract 32·Σ_g sc_g·bsum_g;
//   the other targets: the same integer sums, row by row (scalar; those
//     targets keep GGUF's rows: InterleavedWeightsPreferred is false).
// S is exact int32 (wrapping on the way is harmless: the result fits),
// folded per super-block as ref::MatVecRowsQ8K does, acc = fma(dw·dx, S,
// acc), so MatVec, every MatMul tile and the reference agree bit for bit.
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
#include "simd/matvec_kquant_interleaved.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_q6k_interleaved.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "simd/kquant_interleaved_common-inl.h"  // kil::, InterleavedKRows
#include "simd/x86_chain-inl.h"  // KeepChain, PrefetchStreamAhead, StreamAt, kStreamPrefetchBytes

#ifndef KVEDGE_SIMD_MATVEC_Q6K_INTERLEAVED_ONCE_
#define KVEDGE_SIMD_MATVEC_Q6K_INTERLEAVED_ONCE_
namespace kvedge {
namespace q6il {

// Input vectors quantized at a time; each group streams once per tile.
constexpr size_t kTile = 8;

// One input vector's Q8_K activations over one chunk, plus per super-block
// −32·bsums[g] (the AVX3_DL dot's start) and the bsums as int16 pairs in
// the order the scales meet them: (b4k, b4k+2), (b4k+1, b4k+3) for k < 4.
struct Q6Chunk {
  BlockQ8_K a[kil::kChunkSuperBlocks];
  int32_t bias[kil::kChunkSuperBlocks][16];
  int32_t bsum_pairs[kil::kChunkSuperBlocks][8];
};

// x: f32 [nsb·256] → c (nsb ≤ kil::kChunkSuperBlocks).
inline void PrepareQ6Chunk(const float* x, size_t nsb, Q6Chunk* c) {
  QuantizeRowQ8KFast(x, c->a, nsb * kSuperBlock);
  for (size_t s = 0; s < nsb; ++s) {
    const int16_t* b = c->a[s].bsums;  // |b| ≤ 16·128
    for (int g = 0; g < 16; ++g) c->bias[s][g] = -32 * b[g];
    for (int k = 0; k < 4; ++k) {
      c->bsum_pairs[s][2 * k] = kil::PackPair(b[4 * k], b[4 * k + 2]);
      c->bsum_pairs[s][2 * k + 1] = kil::PackPair(b[4 * k + 1], b[4 * k + 3]);
    }
  }
}

}  // namespace q6il
}  // namespace kvedge
#endif  // KVEDGE_SIMD_MATVEC_Q6K_INTERLEAVED_ONCE_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

using q6il::Q6Chunk;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
constexpr size_t kQ6Lines = kILQ6SuperBytes / 64;  // 52

// Where the lines kStreamPrefetchBytes past super-block cb + s of the
// group's chunk span [cb, cb + nsb) are (StreamAt); the next group's d
// lines are fetched at s = 0.
HWY_INLINE const char* Q6Ahead(const uint8_t* group, size_t group_bytes, size_t nsb_row, size_t cb, size_t nsb,
                               size_t s) {
  if (s == 0) {
    const char* d = reinterpret_cast<const char*>(group) + group_bytes + InterleavedQ6DOffset(nsb_row) + 32 * cb;
    for (size_t l = 0; l < 32 * nsb; l += 64) _mm_prefetch(d + l, _MM_HINT_T0);
    _mm_prefetch(d + 32 * nsb - 1, _MM_HINT_T0);
  }
  return StreamAt(group, group_bytes, cb * kILQ6SuperBytes, (cb + nsb) * kILQ6SuperBytes,
                  (cb + s) * kILQ6SuperBytes + kStreamPrefetchBytes);
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
constexpr size_t kQ6TileVecs = 8;

// y[v·y_stride + row0 + r] (r < valid_rows) for the V vectors xc[0, V) over
// the chunk's super-blocks [cb, cb + nsb) of the group at `group` (nsb_row
// super-blocks a row); the sums continue from y when cb > 0 (same order as
// one pass).
template <size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void Q6Tile(const uint8_t* group, size_t group_bytes, size_t nsb_row, size_t cb,
                                             size_t nsb, const Q6Chunk* xc, float* y, size_t y_stride, size_t row0,
                                             size_t valid_rows) {
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  __m512 sum[V];
  for (size_t v = 0; v < V; ++v) {
    sum[v] = cb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + v * y_stride + row0);
  }
  const __m512i nibble = _mm512_set1_epi8(15), k3f = _mm512_set1_epi8(63);
  constexpr long long kHighNibble = 0x1020408000000000ll;  // GF(2) affine: bit i ← bit i + 4 (i < 4)
  constexpr long long kTopBits = 0x40800000ll;              // bits 6, 7 → bits 4, 5, the rest zero
  const uint8_t* d_array = group + InterleavedQ6DOffset(nsb_row);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = group + (cb + s) * kILQ6SuperBytes;
    // The super-block's 52 lines kStreamPrefetchBytes ahead, at once: spread
    // over the scale groups (Q6PrefetchStep, as the AVX2 kernels do) the
    // batched tiles did not overlap DRAM with their arithmetic on a Zen 5
    // core (MatMul/q6_k.il16/32000x2048/dram/batch:8 5.84 → 3.75 ms, batch:4
    // 3.71 → 2.10; medians of 3) and MatVec read 25.3 → 29.2 GB/s (medians
    // of 5 interleaved rounds).
    const char* ahead = Q6Ahead(group, group_bytes, nsb_row, cb, nsb, s);
    for (size_t l = 0; l < kQ6Lines; ++l) _mm_prefetch(ahead + 64 * l, _MM_HINT_T0);
    __m512i isum[V];
    for (size_t v = 0; v < V; ++v) isum[v] = _mm512_setzero_si512();
    // Unrolled: the shift counts, affine matrices and patterns are constants.
#pragma GCC unroll 2
    for (size_t h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (size_t k = 0; k < 2; ++k) {
#pragma GCC unroll 4
        for (size_t q = 0; q < 4; ++q) {
          const size_t g = 8 * h + 2 * q + k;
          const __m512i word = _mm512_load_si512(sb + kILQ6ScalesOffset + 64 * (g / 4));
          const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(word, static_cast<unsigned>(24 - 8 * (g % 4))), 24);
          __m512i w[4];
          for (size_t t = 0; t < 4; ++t) {
            const __m512i a = _mm512_load_si512(sb + kILQ6AOffset + 64 * (16 * h + 8 * (q % 2) + 4 * k + t));
            if (q < 2) {
              w[t] = _mm512_and_si512(a, k3f);
            } else {
              // B's nibble q − 2 with A's top two bits above it (GF(2) affine).
              const __m512i b = _mm512_load_si512(sb + kILQ6BOffset + 64 * (8 * h + 4 * k + t));
              const __m512i top = _mm512_gf2p8affine_epi64_epi8(a, _mm512_set1_epi64(kTopBits), 0);
              w[t] = q == 2 ? _mm512_ternarylogic_epi32(b, top, nibble, 0xEC)  // (b & 15) | top
                            : _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(b, _mm512_set1_epi64(kHighNibble), 0), top);
            }
          }
          for (size_t v = 0; v < V; ++v) {
            const int8_t* x8 = xc[v].a[s].qs + 128 * h + 32 * q + 16 * k;
            __m512i acc = _mm512_set1_epi32(xc[v].bias[s][g]);
            for (size_t t = 0; t < 4; ++t) acc = Dpbusd(acc, w[t], x8 + 4 * t);
            // In chain order (KeepChain): reassociated into a tree, the
            // sums held every group's product live and spilled them (333
            // zmm stack accesses in the 8-vector tile, 41 with this):
            // MatMul/q6_k.il16/2048x2048/batch:8 206 → 164 µs, /dram
            // 295 → 241, 32000x2048/dram 4.51 → 3.72 ms (Zen 5, medians
            // of 3 alternated rounds); the 8-stream TinyLlama Q4_K_M step
            // 48.7 → 47.1 ms (10 runs each, ABBA).
            isum[v] = KeepChain(_mm512_add_epi32(isum[v], _mm512_mullo_epi32(acc, sc)));
          }
        }
      }
    }
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d_array + 32 * (cb + s))));
    for (size_t v = 0; v < V; ++v) {
      const float dx = xc[v].a[s].d;
      sum[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[v]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), sum[v]);
    }
  }
  for (size_t v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + v * y_stride + row0, mask, sum[v]);
}
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// 8 rows per 256-bit vector: a group is two halves, rows 8h … 8h + 7 at
// byte 32h of every line (and 16h of the f16 d array).
constexpr size_t kQ6TileVecs = 4;
constexpr size_t kQ6HalfRows = 8;

// Spread over the super-block's 16 scale groups: 4 of its 52 lines at
// group g < 13 (a burst of 52 fills the miss buffers ahead of the loads;
// the AVX3_DL kernel's burst measured faster on a Zen 5 core, where these
// AVX2 tiles already overlapped DRAM with their arithmetic).
HWY_INLINE void Q6PrefetchStep(const char* ahead, size_t g) {
  if (g * 4 >= kQ6Lines) return;
  for (size_t l = 0; l < 4; ++l) _mm_prefetch(ahead + 64 * (4 * g + l), _MM_HINT_T0);
}

// vpshufb pattern putting byte j of each int32 lane into the high byte of
// both its int16 halves (then srai 8: the int16 pair (b, b) sign-extended).
HWY_INLINE __m256i Q6PairPattern(int j) {
  int32_t p[4];
  for (int l = 0; l < 4; ++l) {
    p[l] = 0x80 | (4 * l + j) << 8 | 0x80 << 16 | static_cast<int32_t>(static_cast<uint32_t>(4 * l + j) << 24);
  }
  return _mm256_setr_epi32(p[0], p[1], p[2], p[3], p[0], p[1], p[2], p[3]);
}

HWY_INLINE __m256i Q6Load256(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
HWY_INLINE __m256i Q6Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Scale g of a row half's 8 rows as the sign-extended int16 pair (sc, sc)
// of every lane (off: the half's byte offset in a line).
HWY_INLINE __m256i Q6Scale(const uint8_t* sb, size_t off, size_t g) {
  return _mm256_srai_epi16(_mm256_shuffle_epi8(Q6Load256(sb + kILQ6ScalesOffset + 64 * (g / 4) + off),
                                               Q6PairPattern(static_cast<int>(g % 4))),
                           8);
}

// Code vector t (weights 4t … 4t + 3 of each row) of scale group (h, q, k)
// for a row half: A & 63 for q < 2; for q ≥ 2 B's nibble q − 2 with A's top
// two bits at bits 4, 5 (16-bit shifts: what crosses a byte boundary is
// masked off).
HWY_INLINE __m256i Q6Codes(const uint8_t* sb, size_t off, size_t h, size_t q, size_t k, size_t t) {
  const __m256i a = Q6Load256(sb + kILQ6AOffset + 64 * (16 * h + 8 * (q % 2) + 4 * k + t) + off);
  if (q < 2) return _mm256_and_si256(a, _mm256_set1_epi8(63));
  const __m256i b = Q6Load256(sb + kILQ6BOffset + 64 * (8 * h + 4 * k + t) + off);
  const __m256i low = _mm256_and_si256(q == 2 ? b : _mm256_srli_epi16(b, 4), _mm256_set1_epi8(15));
  return _mm256_or_si256(low, _mm256_and_si256(_mm256_srli_epi16(a, 2), _mm256_set1_epi8(0x30)));
}

// sum + dw·dx·(S − 32·Σ_g sc_g·bsums[g]) for a row half (off, d: its byte
// offsets in a line and in the d array's 32 bytes): the scales (4k, 4k + 2)
// and (4k + 1, 4k + 3) of word k as sign-extended int16 pairs against the
// bsums'.
HWY_INLINE __m256 Q6Fold(const uint8_t* sb, size_t off, const uint8_t* d, __m256i isum, const int32_t* bp, float dx,
                         __m256 sum) {
  __m256i m = _mm256_setzero_si256();
  for (size_t k = 0; k < 4; ++k) {
    const __m256i word = Q6Load256(sb + kILQ6ScalesOffset + 64 * k + off);
    m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_srai_epi16(_mm256_slli_epi16(word, 8), 8),
                                              _mm256_set1_epi32(bp[2 * k])));
    m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_srai_epi16(word, 8), _mm256_set1_epi32(bp[2 * k + 1])));
  }
  const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(m, 5));
  const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), sum);
}

// MatVec: both row halves per scale group, so the group streams once and
// each broadcast activation word meets both halves' codes; the int16 pairs
// and int32 sums are kept in chain order (AddChain*) and the prefetches tied
// to the chains (4 of the super-block's 52 lines per group while g < 13).
// On a Zen-1 core this ran ~1.5x the half-at-a-time loop the MatMul tiles
// use.
HWY_NOINLINE void Q6TileMatVec(const uint8_t* group, size_t group_bytes, size_t nsb_row, size_t cb, size_t nsb,
                               const Q6Chunk* xc, float* y, size_t row0, size_t valid_rows) {
  const uint8_t* d_array = group + InterleavedQ6DOffset(nsb_row);
  __m256 sum[2];
  size_t rows[2];
  LoadHalfSums(y + row0, cb, valid_rows, sum, rows);
  for (size_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = group + (cb + s) * kILQ6SuperBytes;
    const char* ahead = Q6Ahead(group, group_bytes, nsb_row, cb, nsb, s);
    __m256i isum0 = _mm256_setzero_si256(), isum1 = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (size_t h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (size_t k = 0; k < 2; ++k) {
#pragma GCC unroll 4
        for (size_t q = 0; q < 4; ++q) {
          const size_t g = 8 * h + 2 * q + k, step = 8 * h + 4 * k + q;  // step: the loop's order
          const int8_t* x8 = xc->a[s].qs + 128 * h + 32 * q + 16 * k;
          __m256i p0[2], p1[2];  // [row half] int16 pairs of t = 0, 1 and t = 2, 3 (≤ 2·2·63·128 each)
#pragma GCC unroll 4
          for (size_t t = 0; t < 4; ++t) {
            const __m256i a = _mm256_set1_epi32(LoadU32(x8 + 4 * t));
#pragma GCC unroll 2
            for (size_t r = 0; r < 2; ++r) {
              const __m256i dot = _mm256_maddubs_epi16(Q6Codes(sb, 32 * r, h, q, k, t), a);
              __m256i& p = t < 2 ? p0[r] : p1[r];
              if (t % 2 == 0) {
                p = dot;
              } else if (r == 0 && 4 * step + t / 2 < kQ6Lines) {
                p = AddChain16(p, dot, ahead + 64 * (4 * step + t / 2));
              } else if (r == 1 && 4 * step + 2 + t / 2 < kQ6Lines) {
                p = AddChain16(p, dot, ahead + 64 * (4 * step + 2 + t / 2));
              } else {
                p = AddChain16(p, dot);
              }
            }
          }
          const __m256i sc0 = Q6Scale(sb, 0, g), sc1 = Q6Scale(sb, 32, g);
          isum0 = AddChain32(isum0, _mm256_add_epi32(_mm256_madd_epi16(p0[0], sc0), _mm256_madd_epi16(p1[0], sc0)));
          isum1 = AddChain32(isum1, _mm256_add_epi32(_mm256_madd_epi16(p0[1], sc1), _mm256_madd_epi16(p1[1], sc1)));
        }
      }
    }
    const uint8_t* d = d_array + 32 * (cb + s);
    sum[0] = Q6Fold(sb, 0, d, isum0, xc->bsum_pairs[s], xc->a[s].d, sum[0]);
    sum[1] = Q6Fold(sb, 32, d + 16, isum1, xc->bsum_pairs[s], xc->a[s].d, sum[1]);
  }
  StoreHalfSums(sum, rows, y + row0);
}

// As the VNNI Q6Tile, for MatMul tiles of V ≥ 2 vectors: one row half per
// pass, each group's 4 code vectors unpacked once for the V vectors (V = 1:
// Q6TileMatVec).
template <size_t V>
HWY_NOINLINE void Q6Tile(const uint8_t* group, size_t group_bytes, size_t nsb_row, size_t cb, size_t nsb,
                         const Q6Chunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  if constexpr (V == 1) {
    Q6TileMatVec(group, group_bytes, nsb_row, cb, nsb, xc, y, row0, valid_rows);
  } else {
    const uint8_t* d_array = group + InterleavedQ6DOffset(nsb_row);
    for (size_t r = 0; r * kQ6HalfRows < valid_rows; ++r) {
      const size_t first = r * kQ6HalfRows, rows = std::min(kQ6HalfRows, valid_rows - first), off = 32 * r;
      __m256 sum[V];
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN float tmp[kQ6HalfRows] = {};
        if (cb > 0) std::copy(y + v * y_stride + row0 + first, y + v * y_stride + row0 + first + rows, tmp);
        sum[v] = _mm256_load_ps(tmp);
      }
      for (size_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = group + (cb + s) * kILQ6SuperBytes;
        const char* ahead = r == 0 ? Q6Ahead(group, group_bytes, nsb_row, cb, nsb, s) : nullptr;
        __m256i isum[V];
        for (size_t v = 0; v < V; ++v) isum[v] = _mm256_setzero_si256();
        // Unrolled: the shift counts and patterns are constants.
#pragma GCC unroll 2
        for (size_t h = 0; h < 2; ++h) {
#pragma GCC unroll 2
          for (size_t k = 0; k < 2; ++k) {
#pragma GCC unroll 4
            for (size_t q = 0; q < 4; ++q) {
              const size_t g = 8 * h + 2 * q + k;
              if (ahead != nullptr) Q6PrefetchStep(ahead, 8 * h + 4 * k + q);
              const __m256i sc = Q6Scale(sb, off, g);
              __m256i w[4];
              for (size_t t = 0; t < 4; ++t) w[t] = Q6Codes(sb, off, h, q, k, t);
              for (size_t v = 0; v < V; ++v) {
                const int8_t* x8 = xc[v].a[s].qs + 128 * h + 32 * q + 16 * k;
                const __m256i p0 = AddChain16(_mm256_maddubs_epi16(w[0], Q6Broadcast4(x8)),
                                              _mm256_maddubs_epi16(w[1], Q6Broadcast4(x8 + 4)));
                const __m256i p1 = AddChain16(_mm256_maddubs_epi16(w[2], Q6Broadcast4(x8 + 8)),
                                              _mm256_maddubs_epi16(w[3], Q6Broadcast4(x8 + 12)));
                isum[v] = AddChain32(isum[v], _mm256_madd_epi16(p0, sc));
                isum[v] = AddChain32(isum[v], _mm256_madd_epi16(p1, sc));
              }
            }
          }
        }
        const uint8_t* d = d_array + 32 * (cb + s) + 16 * r;
        for (size_t v = 0; v < V; ++v) sum[v] = Q6Fold(sb, off, d, isum[v], xc[v].bsum_pairs[s], xc[v].a[s].d, sum[v]);
      }
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN float tmp[kQ6HalfRows];
        _mm256_store_ps(tmp, sum[v]);
        std::copy(tmp, tmp + rows, y + v * y_stride + row0 + first);
      }
    }
  }
}
#else
// Portable form: the integer sums row by row from the layout (the
// reference's arithmetic), the same f32 fold.
constexpr size_t kQ6TileVecs = 8;

template <size_t V>
HWY_NOINLINE void Q6Tile(const uint8_t* group, size_t /*group_bytes*/, size_t nsb_row, size_t cb, size_t nsb,
                         const Q6Chunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  for (size_t r = 0; r < valid_rows; ++r) {
    float acc[V];
    for (size_t v = 0; v < V; ++v) acc[v] = cb == 0 ? 0.0f : y[v * y_stride + row0 + r];
    for (size_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = group + (cb + s) * kILQ6SuperBytes;
      uint16_t d;
      std::memcpy(&d, group + InterleavedQ6DOffset(nsb_row) + 32 * (cb + s) + 2 * r, 2);
      const float dw = HalfToFloat(d);
      for (size_t v = 0; v < V; ++v) {
        const BlockQ8_K& a = xc[v].a[s];
        int32_t isum = 0;
        for (int i = 0; i < kSuperBlock; ++i) {
          const int half = i / 128, quarter = (i % 128) / 32, l = i % 32;
          const size_t lbyte = 64 * half + l + 32 * (quarter & 1), hbyte = 32 * half + l;
          const uint8_t ab = sb[kILQ6AOffset + 64 * (lbyte / 4) + 4 * r + lbyte % 4];
          const uint8_t bb = sb[kILQ6BOffset + 64 * (hbyte / 4) + 4 * r + hbyte % 4];
          const int code = quarter < 2 ? ab & 63 : (bb >> (4 * (quarter - 2)) & 15) | (ab >> 6) << 4;
          const size_t g = static_cast<size_t>(8 * half + l / 16 + 2 * quarter);
          const auto sc = static_cast<int8_t>(sb[kILQ6ScalesOffset + 64 * (g / 4) + 4 * r + g % 4]);
          isum += sc * (code - 32) * a.qs[i];
        }
        acc[v] = std::fma(dw * a.d, static_cast<float>(isum), acc[v]);
      }
    }
    for (size_t v = 0; v < V; ++v) y[v * y_stride + row0 + r] = acc[v];
  }
}
#endif

// Q6_K for InterleavedKRows.
struct Q6Format {
  using Chunk = Q6Chunk;
  static constexpr size_t kTile = q6il::kTile, kTileVecs = kQ6TileVecs;
  static void Prepare(const float* x, size_t nsb, Chunk* c) { q6il::PrepareQ6Chunk(x, nsb, c); }
  template <size_t V>
  static void Tile(const MatrixView& m, const uint8_t* group, size_t group_bytes, size_t cb, size_t nsb,
                   const Chunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
    Q6Tile<V>(group, group_bytes, m.cols / kSuperBlock, cb, nsb, xc, y, y_stride, row0, valid_rows);
  }
};

void Q6ILRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  InterleavedKRows<Q6Format>(m, x, n, y, row_begin, row_end);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(Q6ILRowsT);

void Q6KInterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  if (w.type != WeightType::kQ6_K || w.layout != WeightLayout::kInterleaved16) {
    std::fprintf(stderr, "%s:%d: %s: not an interleaved Q6_K matrix\n", __FILE__, __LINE__, WeightTypeName(w.type));
    std::abort();
  }
  HWY_DYNAMIC_DISPATCH(Q6ILRowsT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
