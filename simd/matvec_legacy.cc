// Products with Q8_0/Q4_0 weights in the row-major layout (WeightKernel::kInt8,
// WeightLayout::kRows), compiled once per Highway target.
//
// Weight products are memory-bound in decode: every kernel streams each weight
// byte once, with f32 accumulators. Quantized formats (Q8_0, Q4_0) take the
// integer path llama.cpp uses for its Q8_0 activations: x is quantized per
// block of 32 to int8 codes (held as int16) with an f32 scale, once per call
// and per 4096 columns (stack scratch, no heap), and each block's dot product
// is an exact int16×int16→int32 multiply-add; only the per-block
// scale dw·dx and the running sum are f32. Error versus the f32 product is
// bounded by Σ_blocks (amax_x/254)·Σ|w| (activation rounding) plus f32
// accumulation; see docs/model-kernels.md for measured values.
//
// Every (weight row, input vector) pair runs the same op sequence whatever
// tile it is computed in, so MatVec with any thread count and MatMul agree
// with single-threaded MatVec bit for bit.
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "simd/matvec_legacy.h"
#include "simd/model_kernels.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_legacy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

// Per-target helpers.
#include "simd/legacy_int-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One Q8_0/Q4_0 block (32 weights) as int16 lanes: a whole block per vector on
// AVX3 (32 lanes), half a block on AVX2/SVE-256, 4 steps on NEON/SSE4, 32 on
// the 1-lane SCALAR target. Lanes(D16) is a power of two ≤ 32, so it divides
// the block (exactly 32 on AVX3, where Q4_0 decodes a whole block at once).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr size_t kMaxI16Lanes = 32;
#else
constexpr size_t kMaxI16Lanes = 16;
#endif
using D16 = hn::CappedTag<int16_t, kMaxI16Lanes>;
using D32 = hn::Repartition<int32_t, D16>;
using DF32 = hn::Repartition<float, D16>;
using V16 = hn::Vec<D16>;
using V32 = hn::Vec<D32>;
using VF32 = hn::Vec<DF32>;

// Weights [p, p + Lanes(d16)) of a block as int16 in [−128, 127].
HWY_INLINE V16 DecodeStep(D16 d16, const BlockQ8_0& blk, size_t p) {
  const hn::Rebind<int8_t, D16> d8;
  return hn::PromoteTo(d16, hn::LoadU(d8, blk.qs + p));
}
HWY_INLINE V16 DecodeStep(D16 d16, const BlockQ4_0& blk, size_t p) {
  const V16 eight = hn::Set(d16, 8);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  {
    // 16 bytes → 16 u16, low nibbles (weights 0…15) in the lower half and
    // high nibbles (16…31) in the upper half: one load, 3 ops, then − 8.
    (void)p;
    const hn::Half<D16> dh;
    const hn::Rebind<uint8_t, decltype(dh)> du8;
    const auto bytes = hn::PromoteTo(dh, hn::LoadU(du8, blk.qs));
    const auto lo = hn::And(bytes, hn::Set(dh, 15));
    const auto hi = hn::ShiftRight<4>(bytes);
    return hn::Sub(hn::Combine(d16, hi, lo), eight);
  }
#else
  {
    // Lanes ≤ 16: the step lies inside one nibble half.
    const hn::Rebind<uint8_t, D16> du8;
    const V16 bytes = hn::PromoteTo(d16, hn::LoadU(du8, blk.qs + (p & 15)));
    const V16 codes = p < 16 ? hn::And(bytes, hn::Set(d16, 15)) : hn::ShiftRight<4>(bytes);
    return hn::Sub(codes, eight);
  }
#endif
}

// A register tile of R weight rows × V quantized input vectors over blocks
// [0, nb): each decoded weight step is used V times and each activation step
// R times. Per (row, vector) pair and block: int16×int16→int32 multiply-adds
// (exact), one convert, one FMA with the block scale. The sequence per pair is
// the same for every R, V, so all tile shapes agree bit for bit.
//   w[r]: [nb] blocks of row r; xq[v]: [nb·32] codes; s: [R·V][kChunkBlocks]
//   scales dw·dx; out: [R][V]. prefetch_ahead (blocks, 0 = off): each row
//   stream prefetches the same block that many blocks on (the next row group).
#if HWY_HAVE_SCALABLE
// SVE vectors are sizeless and cannot form arrays: one (row, vector) pair at a
// time, with the same op sequence as the register tile below.
template <class Block>
HWY_INLINE float QuantPair(const Block* w, const int16_t* xq, const float* s, size_t nb, size_t prefetch_ahead) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t n = hn::Lanes(d16);
  VF32 acc = hn::Zero(df);
  for (size_t b = 0; b < nb; ++b) {
    if (prefetch_ahead != 0) hwy::Prefetch(w + b + prefetch_ahead);
    V32 s0 = hn::Zero(d32), s1 = hn::Zero(d32);
    for (size_t p = 0; p < static_cast<size_t>(kQuantBlock); p += n) {
      s0 = hn::ReorderWidenMulAccumulate(d32, DecodeStep(d16, w[b], p), hn::LoadU(d16, xq + b * kQuantBlock + p),
                                         s0, s1);
    }
    acc = hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(s0, s1)), hn::Set(df, s[b]), acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

template <class Block, size_t R, size_t V>
HWY_NOINLINE void QuantTile(const Block* const* w, const int16_t* const* xq, const float* s, size_t nb,
                            size_t prefetch_ahead, float* out) {
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) {
      out[r * V + v] = QuantPair(w[r], xq[v], s + (r * V + v) * kChunkBlocks, nb, prefetch_ahead);
    }
  }
}
#else
template <class Block, size_t R, size_t V>
HWY_NOINLINE void QuantTile(const Block* const* w, const int16_t* const* xq, const float* s, size_t nb,
                            size_t prefetch_ahead, float* out) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t n = hn::Lanes(d16);
  VF32 acc[R][V];
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) acc[r][v] = hn::Zero(df);
  }
  for (size_t b = 0; b < nb; ++b) {
    if (prefetch_ahead != 0) {
      for (size_t r = 0; r < R; ++r) hwy::Prefetch(w[r] + b + prefetch_ahead);
    }
    V32 s0[R][V], s1[R][V];
    for (size_t r = 0; r < R; ++r) {
      for (size_t v = 0; v < V; ++v) s0[r][v] = s1[r][v] = hn::Zero(d32);
    }
    for (size_t p = 0; p < static_cast<size_t>(kQuantBlock); p += n) {
      V16 xv[V];
      for (size_t v = 0; v < V; ++v) xv[v] = hn::LoadU(d16, xq[v] + b * kQuantBlock + p);
      for (size_t r = 0; r < R; ++r) {
        const V16 wv = DecodeStep(d16, w[r][b], p);
        for (size_t v = 0; v < V; ++v) s0[r][v] = hn::ReorderWidenMulAccumulate(d32, wv, xv[v], s0[r][v], s1[r][v]);
      }
    }
    for (size_t r = 0; r < R; ++r) {
      for (size_t v = 0; v < V; ++v) {
        const VF32 sum = hn::ConvertTo(df, hn::RearrangeToOddPlusEven(s0[r][v], s1[r][v]));
        acc[r][v] = hn::MulAdd(sum, hn::Set(df, s[(r * V + v) * kChunkBlocks + b]), acc[r][v]);
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) out[r * V + v] = hn::GetLane(hn::SumOfLanes(df, acc[r][v]));
  }
}
#endif  // HWY_HAVE_SCALABLE

// Tile shapes: MatVec runs 4×1 (and 1×1 for tail rows); MatMul 4×4, 4×1,
// 1×4, 1×1.
constexpr size_t kTileRows = 4;
constexpr size_t kTileVecs = 4;

// Calls tile.template operator()<R, V>() for the shape (nr, tv).
template <class F>
HWY_INLINE void DispatchTileShape(size_t nr, size_t tv, const F& tile) {
  if (nr == kTileRows && tv == kTileVecs) {
    tile.template operator()<kTileRows, kTileVecs>();
  } else if (nr == kTileRows) {
    tile.template operator()<kTileRows, 1>();
  } else if (tv == kTileVecs) {
    tile.template operator()<1, kTileVecs>();
  } else {
    tile.template operator()<1, 1>();
  }
}

// One input vector's activations over one column chunk, int16 layout: the
// codes in column order and one scale per block.
struct WordChunk {
  int16_t q[kChunkCols];   // [chunk cols] int8 codes held in int16
  float dx[kChunkBlocks];  // [chunk blocks] scales
};

template <class Block>
HWY_INLINE void PrepareChunk(const float* x, size_t nb, WordChunk* c) {
  QuantizeActivations(x, nb, c->q, c->dx);
}

// Scale scratch of the int16 path: per row group the f32 block scales of
// each row, per tile their products with each vector's scales.
struct WordScales {
  HWY_ALIGN uint16_t bits[kChunkBlocks];
  HWY_ALIGN float dw[kTileRows][kChunkBlocks];
  HWY_ALIGN float s[kTileRows * kTileVecs * kChunkBlocks];  // [row][vec][block] dw·dx

  template <class Block>
  HWY_INLINE void SetRow(size_t i, const Block* w, size_t nb) { BlockScales(w, nb, bits, dw[i]); }
};

// Tile kernel of the int16 path (QuantTile) on prepared word chunks.
template <class Block, size_t R, size_t V>
HWY_INLINE void TileKernel(const Block* const* w, const WordChunk* const* xc, const float* s, size_t nb,
                           size_t prefetch_ahead, float* out) {
  const int16_t* xq[V];
  for (size_t v = 0; v < V; ++v) xq[v] = xc[v]->q;
  QuantTile<Block, R, V>(w, xq, s, nb, prefetch_ahead, out);
}

#if HWY_TARGET == HWY_AVX3_DL
// ------------------------------ AVX-512 VNNI byte dot products
//
// Highway 1.0.3 has no u8×i8 dot product; this target (Ice Lake, Zen 4 and
// later) has VNNI and VBMI, used here through raw intrinsics. Two blocks per
// 512-bit vector: the pair is loaded, one byte permute puts its codes in
// lane order as unsigned bytes (Q4_0: 0…15; Q8_0: code + 128), and vpdpbusd
// multiplies them with the int8 activation codes, adding each group of 4
// products into an int32 lane. Each accumulator starts at −offset·(sum of
// that lane's 4 activation codes) (offset 8 or 128, prepared once per chunk),
// so every lane ends at an exact Σ w_code·x_code.
//
// Lane l holds 4 codes of block b + (l & 1), so a pair's scales are the
// lane pattern (s0, s1, s0, s1, …): dw from the loaded bytes (one word
// permute, one f16 convert per row and pair), dx a 64-bit broadcast load.
// Per (row, vector, pair): vpdpbusd, convert, dw·dx, FMA; per (row, pair):
// the decode (Q4_0: vpermt2b + one GF(2) affine op; Q8_0: vpermt2b + xor)
// and the two scale ops. KVEDGE_ATTR_VNNI512 (simd/x86_vnni.h) adds the
// VNNI and GFNI features to functions using them.
constexpr size_t kPairCodes = 64;  // int8 activation codes per pair
constexpr size_t kPairLanes = 16;  // int32 lanes per pair
constexpr size_t kChunkPairs = kChunkBlocks / 2;

// One input vector's activations over one column chunk, in pair order.
struct ByteChunk {
  HWY_ALIGN int8_t q[kChunkPairs * kPairCodes];      // [pair][64] codes, lane order
  HWY_ALIGN int32_t init[kChunkPairs * kPairLanes];  // [pair][lane] −offset·Σ of the lane's 4 codes
  HWY_ALIGN float dx[kChunkBlocks];                  // [chunk blocks] scales
};

HWY_INLINE __m512i LoadConst(const uint8_t (&bytes)[64]) { return _mm512_loadu_si512(bytes); }

// The f16 block scales at words 0 and `second` of a loaded pair, as f32 in
// the lane pattern (d[b], d[b+1], d[b], …): one word permute, one convert.
// Converting in the tile beats a per-row pass over the scales (which costs a
// scalar phase per row: decode 59 vs 52.5 ms/token on TinyLlama q4_0).
HWY_INLINE __m512 PairHalves(__m512i pair, int second) {
  const __m512i idx = _mm512_set1_epi32(second << 16);
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, pair)));
}

// Code position of byte i of a pair vector: lane i/4 holds weights
// 4·(lane/2) … +3 of block lane & 1 (Q4_0: of the low-nibble half for i < 32,
// the high-nibble half after).
HWY_INLINE constexpr size_t PairBlock(size_t i) { return (i >> 2) & 1; }
HWY_INLINE constexpr size_t PairWeightQ8(size_t i) { return 4 * (i >> 3) + (i & 3); }
HWY_INLINE constexpr size_t PairWeightQ4(size_t i) { return 16 * (i >> 5) + 4 * ((i & 31) >> 3) + (i & 3); }

// vpermt2b indices: byte offset of each code in the pair (block b's codes at
// kFirst, b+1's at kSecond), offsets from kSplit on taken from the second
// register (index 64 + offset − kSplit).
template <size_t kFirst, size_t kSecond, size_t (*Weight)(size_t), size_t kWeightMod, size_t kSplit>
constexpr auto MakeCodeIndex() {
  struct Table {
    alignas(64) uint8_t idx[64];
  } t{};
  for (size_t i = 0; i < 64; ++i) {
    const size_t offset = (PairBlock(i) ? kSecond : kFirst) + Weight(i) % kWeightMod;
    t.idx[i] = static_cast<uint8_t>(offset < kSplit ? offset : 64 + offset - kSplit);
  }
  return t;
}

template <class Block>
struct BytePair;

template <>
struct BytePair<BlockQ4_0> {
  static constexpr int kOffsetShift = 3;  // codes are w + 8
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }
  static constexpr long long kLowNibble = 0x0102040800000000ll;   // bit i ← bit i, i < 4
  static constexpr long long kHighNibble = 0x1020408000000000ll;  // bit i ← bit i + 4

  // Codes of w[0] and (if two) w[1] as unsigned bytes in lane order. Reads
  // only the pair's 36 (or 18) bytes.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ4_0* w, bool two, __m512* dw) {
    // qs byte j of block b is at 2 + j, of block b+1 at 20 + j (32 and up:
    // bytes 32–35 of the pair, in the second table at 64 + 0…3); weight j
    // and j + 16 share the byte, the upper 32 bytes then take its high nibble.
    static constexpr auto kIdx = MakeCodeIndex<2, 20, PairWeightQ4, 16, 32>();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(w);
    const __m512i lo = two ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))
                           : _mm512_maskz_loadu_epi8(0x3FFFFull, p);
    const __m512i hi = _mm512_castsi128_si512(_mm_cvtsi32_si128(two ? LoadU32(p + 32) : 0));
    const __m512i bytes = _mm512_permutex2var_epi8(lo, LoadConst(kIdx.idx), hi);
    *dw = PairHalves(lo, 9);
    // One GF(2) affine map per byte keeps the low nibble (lower 4 qwords) or
    // moves the high nibble down (upper 4): matrix row i is byte 7 − i.
    const __m512i nibble = _mm512_set_epi64(kHighNibble, kHighNibble, kHighNibble, kHighNibble, kLowNibble,
                                            kLowNibble, kLowNibble, kLowNibble);
    return _mm512_gf2p8affine_epi64_epi8(bytes, nibble, 0);
  }
};

template <>
struct BytePair<BlockQ8_0> {
  static constexpr int kOffsetShift = 7;  // codes are w + 128
  static constexpr size_t Weight(size_t i) { return PairWeightQ8(i); }

  // Reads only the pair's 68 (or 34) bytes: 64 in one load, 4 more.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ8_0* w, bool two, __m512* dw) {
    // qs byte j of block b is at 2 + j, of block b+1 at 36 + j (64 and up:
    // the second register of the two-table permute).
    static constexpr auto kIdx = MakeCodeIndex<2, 36, PairWeightQ8, 32, 64>();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(w);
    const __m512i lo = two ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(0x3FFFFFFFFull, p);
    const __m512i hi = _mm512_castsi128_si512(_mm_cvtsi32_si128(two ? LoadU32(p + 64) : 0));
    const __m512i codes = _mm512_permutex2var_epi8(lo, LoadConst(kIdx.idx), hi);
    *dw = PairHalves(lo, 17);
    return _mm512_xor_si512(codes, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// Quantizes one chunk as QuantizeActivations and lays it out in pairs.
template <class Block>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void PrepareChunk(const float* x, size_t nb, ByteChunk* c) {
  HWY_ALIGN int16_t q16[kChunkCols];  // [chunk cols] codes in column order
  QuantizeActivations(x, nb, q16, c->dx);
  if (nb % 2 != 0) c->dx[nb] = 0.0f;  // the missing block of the last pair
  for (size_t p = 0; p < (nb + 1) / 2; ++p) {
    const size_t b = 2 * p;
    const bool two = b + 1 < nb;
    int8_t* q = c->q + p * kPairCodes;
    for (size_t i = 0; i < kPairCodes; ++i) {
      const size_t blk = PairBlock(i);
      q[i] = blk == 0 || two ? static_cast<int8_t>(q16[(b + blk) * kQuantBlock + BytePair<Block>::Weight(i)]) : 0;
    }
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), _mm512_load_si512(q));
    _mm512_store_si512(c->init + p * kPairLanes,
                       _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, BytePair<Block>::kOffsetShift)));
  }
}

// Lane pattern (v[b], v[b+1], v[b], …) of two f32 at v (a 64-bit broadcast
// load). v[b+1] must be readable (PrepareChunk zeroes dx past an odd end).
HWY_INLINE __m512 PairBroadcast(const float* v) {
  double both;
  std::memcpy(&both, v, sizeof(both));
  return _mm512_castpd_ps(_mm512_set1_pd(both));
}

// One pair step of an R×V tile: each decoded weight pair is used V times and
// each activation pair R times; the per-(row, vector) op sequence is the same
// in every tile shape. s: [R·V][kChunkBlocks] dw·dx.
template <class Block, size_t R, size_t V>
KVEDGE_ATTR_VNNI512 HWY_INLINE void BytePairStep(const Block* const* w, const ByteChunk* const* xc, size_t p,
                                                 bool two, __m512 (&acc)[R][V]) {
  __m512i xv[V];
  for (size_t v = 0; v < V; ++v) xv[v] = _mm512_load_si512(xc[v]->q + p * kPairCodes);
  for (size_t r = 0; r < R; ++r) {
    __m512 dw;
    const __m512i codes = BytePair<Block>::Decode(w[r] + 2 * p, two, &dw);
    for (size_t v = 0; v < V; ++v) {
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(xc[v]->init + p * kPairLanes), codes, xv[v]);
      const __m512 scale = _mm512_mul_ps(dw, PairBroadcast(xc[v]->dx + 2 * p));
      acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[r][v]);
    }
  }
}

// out[r·V + v] = row r · vector v over blocks [0, nb) of the chunk.
template <class Block, size_t R, size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void ByteTile(const Block* const* w, const ByteChunk* const* xc, size_t nb,
                                               size_t prefetch_ahead, float* out) {
  __m512 acc[R][V];
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const size_t full_pairs = nb / 2;
  for (size_t p = 0; p < full_pairs; ++p) {
    if (prefetch_ahead != 0) {
      for (size_t r = 0; r < R; ++r) hwy::Prefetch(w[r] + 2 * p + prefetch_ahead);
    }
    BytePairStep<Block, R, V>(w, xc, p, /*two=*/true, acc);
  }
  if (nb & 1) BytePairStep<Block, R, V>(w, xc, full_pairs, /*two=*/false, acc);
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) out[r * V + v] = _mm512_reduce_add_ps(acc[r][v]);
  }
}

// The byte path converts block scales inside the tile: nothing per row.
struct ByteScales {
  template <class Block>
  HWY_INLINE void SetRow(size_t, const Block*, size_t) {}
};

template <class Block>
HWY_INLINE void RunTile(size_t nr, size_t tv, const Block* const* wr, const ByteChunk* const* xc, size_t nb,
                        size_t prefetch_ahead, ByteScales&, float* out) {
  DispatchTileShape(nr, tv, [&]<size_t R, size_t V>() { ByteTile<Block, R, V>(wr, xc, nb, prefetch_ahead, out); });
}

// MatVec streams rows one at a time: one sequential stream is what the
// hardware prefetcher follows best (4 interleaved 1–2 KiB row streams left
// Q8_0 from DRAM at ~60% of MemoryRead), and the byte path has little to
// share between rows. Software prefetch runs ~4 KiB ahead.
using ActChunk = ByteChunk;
using ActScales = ByteScales;
constexpr bool kMatVecRowTiles = false;
#else
using ActChunk = WordChunk;
using ActScales = WordScales;
constexpr bool kMatVecRowTiles = true;
#endif  // HWY_TARGET == HWY_AVX3_DL

template <class Block>
HWY_INLINE void RunTile(size_t nr, size_t tv, const Block* const* wr, const WordChunk* const* xc, size_t nb,
                        size_t prefetch_ahead, WordScales& sc, float* out) {
  for (size_t i = 0; i < nr; ++i) {
    for (size_t j = 0; j < tv; ++j) MulScales(sc.dw[i], xc[j]->dx, nb, sc.s + (i * tv + j) * kChunkBlocks);
  }
  DispatchTileShape(nr, tv, [&]<size_t R, size_t V>() {
    TileKernel<Block, R, V>(wr, xc, sc.s, nb, prefetch_ahead, out);
  });
}

// Rows [row_begin, row_end) × nv input vectors of one column chunk (blocks
// [cb, cb + nb) of each row). xc: [nv] prepared chunks. Writes (cb == 0) or
// adds into y[v·y_stride + r].
template <class Block>
void QuantChunkRows(const Block* w, size_t nb_row, size_t cb, size_t nb, const ActChunk* xc, size_t nv, float* y,
                    size_t y_stride, size_t row_begin, size_t row_end) {
  ActScales scales;
  auto store = [&](size_t r, size_t v, float value) {
    float& dst = y[v * y_stride + r];
    dst = cb == 0 ? value : dst + value;
  };
  const size_t tile_rows = nv == 1 && !kMatVecRowTiles ? 1 : kTileRows;
  if (nv == 1 && !kMatVecRowTiles) {
    // Start the stream: the in-loop prefetch covers what lies ~4 KiB ahead
    // of each step, so fetch the first 4 KiB of this call's rows now.
    const char* first = reinterpret_cast<const char*>(w + row_begin * nb_row + cb);
    const size_t bytes = std::min<size_t>(4096, (row_end - row_begin) * nb_row * sizeof(Block));
    for (size_t off = 0; off < bytes; off += 64) hwy::Prefetch(first + off);
  }
  for (size_t r = row_begin; r < row_end;) {
    const size_t nr = row_end - r >= tile_rows ? tile_rows : 1;
    const Block* wr[kTileRows];
    for (size_t i = 0; i < nr; ++i) {
      wr[i] = w + (r + i) * nb_row + cb;
      scales.SetRow(i, wr[i], nb);
    }
    // MatVec prefetches each row stream ahead, if the target is inside this
    // call's rows: row tiles by one row group, single rows by ~4 KiB.
    size_t prefetch_ahead = 0;
    if (nv == 1 && nr == tile_rows) {
      const size_t ahead = kMatVecRowTiles ? kTileRows * nb_row : std::max<size_t>(4096 / sizeof(Block), nb_row);
      if ((r + nr) * nb_row + ahead <= row_end * nb_row) prefetch_ahead = ahead;
    }
    for (size_t v = 0; v < nv;) {
      const size_t tv = nv - v >= kTileVecs ? kTileVecs : 1;
      const ActChunk* xv[kTileVecs];
      for (size_t j = 0; j < tv; ++j) xv[j] = xc + v + j;
      float out[kTileRows * kTileVecs];
      RunTile(nr, tv, wr, xv, nb, prefetch_ahead, scales, out);
      for (size_t i = 0; i < nr; ++i) {
        for (size_t j = 0; j < tv; ++j) store(r + i, v + j, out[i * tv + j]);
      }
      v += tv;
    }
    r += nr;
  }
}

// y[r] for rows [row_begin, row_end). Column chunks beyond the first add into
// y (in chunk order, the same for every tile shape).
template <class Block>
void QuantMatVecRows(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  const size_t nb_row = m.cols / kQuantBlock;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/32] blocks
  HWY_ALIGN ActChunk xc;
  for (size_t cb = 0; cb < nb_row; cb += kChunkBlocks) {
    const size_t nb = std::min(kChunkBlocks, nb_row - cb);
    PrepareChunk<Block>(x + cb * kQuantBlock, nb, &xc);
    QuantChunkRows(w, nb_row, cb, nb, &xc, 1, y, 0, row_begin, row_end);
  }
}

// Y[n][rows] for rows [row_begin, row_end): tiles of kMatMulTile input
// vectors are quantized on the stack, then each weight row streams once per
// tile, decoded once per group of kTileVecs vectors and multiplied in
// kTileRows × kTileVecs register tiles.
template <class Block>
void QuantMatMulRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  if (n == 1) return QuantMatVecRows<Block>(m, x, y, row_begin, row_end);
  const size_t nb_row = m.cols / kQuantBlock;
  const size_t rows = m.rows;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/32] blocks
  HWY_ALIGN ActChunk xc[kMatMulTile];                    // [tile vector] chunk activations
  for (size_t v0 = 0; v0 < n; v0 += kMatMulTile) {
    const size_t nv = std::min(kMatMulTile, n - v0);
    for (size_t cb = 0; cb < nb_row; cb += kChunkBlocks) {
      const size_t nb = std::min(kChunkBlocks, nb_row - cb);
      for (size_t v = 0; v < nv; ++v) PrepareChunk<Block>(x + (v0 + v) * m.cols + cb * kQuantBlock, nb, xc + v);
      QuantChunkRows(w, nb_row, cb, nb, xc, nv, y + v0 * rows, rows, row_begin, row_end);
    }
  }
}

void MatVecRowsLegacyT(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kQ8_0: return QuantMatVecRows<BlockQ8_0>(m, x, y, row_begin, row_end);
    case WeightType::kQ4_0: return QuantMatVecRows<BlockQ4_0>(m, x, y, row_begin, row_end);
    default: HWY_ABORT("%s: not a Q8_0/Q4_0 weight type", WeightTypeName(m.type));
  }
}

void MatMulRowsLegacyT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kQ8_0: return QuantMatMulRows<BlockQ8_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_0: return QuantMatMulRows<BlockQ4_0>(m, x, n, y, row_begin, row_end);
    default: HWY_ABORT("%s: not a Q8_0/Q4_0 weight type", WeightTypeName(m.type));
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(MatVecRowsLegacyT);
HWY_EXPORT(MatMulRowsLegacyT);

void MatVecRowsLegacy(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(MatVecRowsLegacyT)(w, x, y, row_begin, row_end);
}

void MatMulRowsLegacy(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(MatMulRowsLegacyT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
