// The parts every interleaved K-quant kernel file (matvec_kquant_
// interleaved.cc: Q4_K, matvec_q6k_interleaved.cc, matvec_q23k_
// interleaved.cc: Q3_K, Q2_K, matvec_iq4xs_interleaved.cc: IQ4_XS) shares:
// the activation chunking, the int16 pair packing of the chunks' sums, the
// AVX3_DL broadcast vpdpbusd, the AVX2 chain adds and MatVec half sums, and
// the driver that walks
// vectors × chunks × 16-row groups and
// calls a format's group kernel. A format supplies a chunk type (one input
// vector's Q8_K activations over one chunk plus the sums its kernels
// broadcast), its preparation, and its group kernels (Format below).
// Included by those files once per target, after hwy/highway.h.

// Target-independent part: once per translation unit.
#ifndef KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_ONCE_
#define KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_ONCE_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvedge {
namespace kil {

// Activations are quantized per chunk of this many super-blocks (6144
// columns) and input vector (a chunk is 7.5–10.5 KiB on the stack). A matrix
// of up to 6144 columns streams its groups in one sequential pass, not one
// strided pass per chunk: TinyLlama's FFN down (5632 columns) as Q6_K,
// MatMul/q6_k.il16/2048x5632/dram/batch:8 ~0.8x the time of 4096 + 1536
// (docs/performance.md, twenty-ninth session).
inline constexpr size_t kChunkSuperBlocks = 24;

// The int32 holding int16 lo in its low half and hi in its high half: one
// vpmaddwd / vpdpwssd operand pair of activation sums.
inline int32_t PackPair(int lo, int hi) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16);
}

}  // namespace kil
}  // namespace kvedge
#endif  // KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_ONCE_

// Per-target part.
#if defined(KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_INL_H_
#undef KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_INL_H_
#else
#define KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_INL_H_
#endif

#include "hwy/highway.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"
#include "simd/x86_chain-inl.h"
#include "simd/x86_vnni.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

HWY_INLINE int32_t LoadU32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
HWY_INLINE __m256i Load256(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
// 8 f16 (a half's rows) as f32.
HWY_INLINE __m256 LoadHalves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

// vpshufb pattern giving each int32 lane the int16 pair (b, b) of its byte
// b (zero-extended; b < 4).
HWY_INLINE __m256i PairPattern(size_t b) {
  int32_t p[4];
  for (int l = 0; l < 4; ++l) {
    const int32_t i = 4 * l + static_cast<int32_t>(b);
    p[l] = i | 0x80 << 8 | i << 16 | static_cast<int32_t>(0x80u << 24);
  }
  return _mm256_setr_epi32(p[0], p[1], p[2], p[3], p[0], p[1], p[2], p[3]);
}

// acc + x (16- or 32-bit lanes) as one link of a chain (KeepChain,
// x86_chain-inl.h); with `line`, the link also prefetches that line.
HWY_INLINE __m256i AddChain16(__m256i acc, __m256i x) { return KeepChain(_mm256_add_epi16(acc, x)); }
HWY_INLINE __m256i AddChain32(__m256i acc, __m256i x) { return KeepChain(_mm256_add_epi32(acc, x)); }
HWY_INLINE __m256i AddChain16(__m256i acc, __m256i x, const char* line) {
  return KeepChainPrefetch(_mm256_add_epi16(acc, x), line);
}
HWY_INLINE __m256i AddChain32(__m256i acc, __m256i x, const char* line) {
  return KeepChainPrefetch(_mm256_add_epi32(acc, x), line);
}

// MatVec over both 8-row halves of a group (rows[h]: valid rows of half h,
// 0: none; the sums continue from y when cb > 0).
HWY_INLINE void LoadHalfSums(const float* y, size_t cb, size_t valid_rows, __m256* sum, size_t* rows) {
  for (size_t h = 0; h < 2; ++h) {
    rows[h] = 8 * h < valid_rows ? std::min<size_t>(8, valid_rows - 8 * h) : 0;
    HWY_ALIGN float tmp[8] = {};
    if (cb > 0 && rows[h] > 0) std::copy(y + 8 * h, y + 8 * h + rows[h], tmp);
    sum[h] = _mm256_load_ps(tmp);
  }
}
HWY_INLINE void StoreHalfSums(const __m256* sum, const size_t* rows, float* y) {
  for (size_t h = 0; h < 2; ++h) {
    if (rows[h] == 0) continue;
    HWY_ALIGN float tmp[8];
    _mm256_store_ps(tmp, sum[h]);
    std::copy(tmp, tmp + rows[h], y + 8 * h);
  }
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
// acc += vpdpbusd(w, the 4 int8 codes at q broadcast to every lane), the
// broadcast in the memory operand (matvec_interleaved.cc's DpbusdBroadcast).
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Dpbusd(__m512i acc, __m512i w, const int8_t* q) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(q)));
  return acc;
}
#endif

// Rows [row_begin, row_end) (row_begin a multiple of 16) × n input vectors
// of the kInterleaved16 matrix m; Y[v][m.rows]. Input tiles of
// Format::kTile vectors are quantized per chunk of kil::kChunkSuperBlocks;
// each group's chunk span streams once per kernel tile of up to
// Format::kTileVecs (8, 4, 2, 1) vectors. Format provides
//   Chunk; kTile; kTileVecs (this target's widest kernel tile, 4 or 8);
//   static void Prepare(const float* x, size_t nsb, Chunk* c): x f32
//     [nsb·256] → c (nsb ≤ kChunkSuperBlocks);
//   template <size_t V> static void Tile(const MatrixView& m, const uint8_t*
//     group, size_t group_bytes, size_t cb, size_t nsb, const Chunk* xc,
//     float* y, size_t y_stride, size_t row0, size_t valid_rows): the group
//     kernel, y[v·y_stride + row0 + r] (r < valid_rows) for the V vectors
//     xc[0, V) over the chunk's super-blocks [cb, cb + nsb), continuing
//     from y when cb > 0 (the same order as one pass).
template <class Format>
HWY_INLINE void InterleavedKRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin,
                                 size_t row_end) {
  using Chunk = typename Format::Chunk;
  constexpr size_t kTile = Format::kTile;
  const size_t nsb_row = m.cols / kSuperBlock;
  const size_t group_bytes = InterleavedGroupBytes(m.type, m.cols);
  const uint8_t* base = static_cast<const uint8_t*>(m.data);
  HWY_ALIGN Chunk xc[kTile];
  for (size_t v0 = 0; v0 < n; v0 += kTile) {
    const size_t nv = std::min(kTile, n - v0);
    for (size_t cb = 0; cb < nsb_row; cb += kil::kChunkSuperBlocks) {
      const size_t nsb = std::min(kil::kChunkSuperBlocks, nsb_row - cb);
      for (size_t v = 0; v < nv; ++v) Format::Prepare(x + (v0 + v) * m.cols + cb * kSuperBlock, nsb, xc + v);
      for (size_t r = row_begin; r < row_end; r += kInterleaveRows) {
        const uint8_t* group = base + (r / kInterleaveRows) * group_bytes;
        const size_t valid = std::min(kInterleaveRows, row_end - r);
        float* yv = y + v0 * m.rows;
        for (size_t v = 0; v < nv;) {
          const Chunk* xv = xc + v;
          float* yt = yv + v * m.rows;
          if constexpr (Format::kTileVecs == 8) {
            if (nv - v >= 8) {
              Format::template Tile<8>(m, group, group_bytes, cb, nsb, xv, yt, m.rows, r, valid);
              v += 8;
              continue;
            }
          }
          if (nv - v >= 4) {
            Format::template Tile<4>(m, group, group_bytes, cb, nsb, xv, yt, m.rows, r, valid);
            v += 4;
          } else if (nv - v >= 2) {
            Format::template Tile<2>(m, group, group_bytes, cb, nsb, xv, yt, m.rows, r, valid);
            v += 2;
          } else {
            Format::template Tile<1>(m, group, group_bytes, cb, nsb, xv, yt, m.rows, r, valid);
            v += 1;
          }
        }
      }
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_KQUANT_INTERLEAVED_COMMON_INL_H_
