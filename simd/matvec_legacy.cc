// Products with the legacy 32-weight blocks (WeightKernel::kInt8: Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) in the row-major layout
// (WeightLayout::kRows), compiled once per Highway target.
//
// Weight products are memory-bound in decode: every kernel streams each weight
// byte once, with f32 accumulators. These formats take the integer path
// llama.cpp uses for its Q8_0/Q8_1 activations: x is quantized per block of
// 32 to int8 codes (held as int16) with an f32 scale, once per call and per
// 4096 columns (stack scratch, no heap), and each block's dot product is an
// exact integer multiply-add of the weights' integer codes (ref::QuantCode:
// Q5 with its fifth bit, IQ4_NL through its codebook); only the per-block
// scale dw·dx, the min term of Q4_1/Q5_1 (m·dx·Σq, Σq the block's activation
// code sum) and the running sum are f32. Error versus the f32 product is
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
#include <type_traits>

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

// One legacy block (32 weights) as int16 lanes: a whole block per vector on
// AVX3 (32 lanes), half a block on AVX2/SVE-256, 4 steps on NEON/SSE4, 32 on
// the 1-lane SCALAR target. Lanes(D16) is a power of two ≤ 32, so it divides
// the block (exactly 32 on AVX3, where the 4-bit types decode a whole block at once).
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

// Weights [p, p + Lanes(d16)) of a block as int16 integer codes (ref::
// BlockCode): Q8_0 [−128, 127], Q4_0 [−8, 7], Q4_1 [0, 15], Q5_0 [−16, 15],
// Q5_1 [0, 31], IQ4_NL the table's [−127, 113].
HWY_INLINE V16 DecodeStep(D16 d16, const BlockQ8_0& blk, size_t p) {
  const hn::Rebind<int8_t, D16> d8;
  return hn::PromoteTo(d16, hn::LoadU(d8, blk.qs + p));
}

// 4-bit codes 0…15 of weights [p, p + Lanes(d16)) from the 16 qs bytes of a
// legacy block: weight j in the low nibble of byte j, j + 16 in the high one.
HWY_INLINE V16 NibbleStep(D16 d16, const uint8_t* qs, size_t p) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // 16 bytes → 16 u16, low nibbles (weights 0…15) in the lower half and
  // high nibbles (16…31) in the upper half: one load, 3 ops.
  (void)p;
  const hn::Half<D16> dh;
  const hn::Rebind<uint8_t, decltype(dh)> du8;
  const auto bytes = hn::PromoteTo(dh, hn::LoadU(du8, qs));
  return hn::Combine(d16, hn::ShiftRight<4>(bytes), hn::And(bytes, hn::Set(dh, 15)));
#else
  // Lanes ≤ 16: the step lies inside one nibble half.
  const hn::Rebind<uint8_t, D16> du8;
  const V16 bytes = hn::PromoteTo(d16, hn::LoadU(du8, qs + (p & 15)));
  return p < 16 ? hn::And(bytes, hn::Set(d16, 15)) : hn::ShiftRight<4>(bytes);
#endif
}

// 16 where the fifth bit of weight j (bit j of the 4 qh bytes of a Q5
// block) is set, else 0, for weights [p, p + Lanes(d16)): the bits are
// broadcast 16 at a time and lane k tests bit k mod 16.
HWY_INLINE V16 FifthBitStep(D16 d16, const uint8_t* qh, size_t p) {
  alignas(64) static constexpr int16_t kBit[32] = {
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768,
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768};
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (void)p;
  const hn::Half<D16> dh;
  const V16 v = hn::Combine(d16, hn::Set(dh, static_cast<int16_t>(bits >> 16)), hn::Set(dh, static_cast<int16_t>(bits)));
#else
  const V16 v = hn::Set(d16, static_cast<int16_t>(bits >> p));
#endif
  return hn::IfThenElseZero(hn::TestBit(v, hn::Load(d16, kBit)), hn::Set(d16, 16));
}

HWY_INLINE V16 DecodeStep(D16 d16, const BlockQ4_0& blk, size_t p) {
  return hn::Sub(NibbleStep(d16, blk.qs, p), hn::Set(d16, 8));
}
HWY_INLINE V16 DecodeStep(D16 d16, const BlockQ4_1& blk, size_t p) { return NibbleStep(d16, blk.qs, p); }
HWY_INLINE V16 DecodeStep(D16 d16, const BlockQ5_0& blk, size_t p) {
  return hn::Sub(hn::Or(NibbleStep(d16, blk.qs, p), FifthBitStep(d16, blk.qh, p)), hn::Set(d16, 16));
}
HWY_INLINE V16 DecodeStep(D16 d16, const BlockQ5_1& blk, size_t p) {
  return hn::Or(NibbleStep(d16, blk.qs, p), FifthBitStep(d16, blk.qh, p));
}
// IQ4_NL: the 4-bit indices through the 16-byte codebook, one byte shuffle.
HWY_INLINE V16 DecodeStep(D16 d16, const BlockIQ4_NL& blk, size_t p) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(d16, kIq4nlValues[hn::GetLane(NibbleStep(d16, blk.qs, p))]);
#else
  const hn::Rebind<int8_t, D16> d8;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const auto table = hn::LoadDup128(d8, kIq4nlValues);  // 32 indices: the table in both 128-bit blocks
#else
  const auto table = hn::LoadU(hn::Full128<int8_t>(), kIq4nlValues);  // ≤ 16 indices, one block
#endif
  return hn::PromoteTo(d16, hn::TableLookupBytes(table, hn::DemoteTo(d8, NibbleStep(d16, blk.qs, p))));
#endif
}

// Q4_1 and Q5_1 blocks carry a min m (w = d·q + m): its product with a
// block of activations is m·dx·Σq, outside the integer dot.
template <class Block>
inline constexpr bool kHasMin = requires(const Block& b) { b.m; };

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

#if HWY_TARGET == HWY_AVX2
#include "simd/matvec_legacy_avx2-inl.h"  // Avx2ByteTile for Q4_1, Q5_0, Q5_1, IQ4_NL
#endif

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
  float sx[kChunkBlocks];  // [chunk blocks] dx·Σq, 0 from nb to nb rounded to 16 (kHasMin only)
};

// dx·Σq per block (the min term's activation side) for blocks [0, nb), 0 up
// to nb rounded to 16.
HWY_INLINE void BlockCodeSums(const int16_t* q, const float* dx, size_t nb, float* sx) {
  size_t b = 0;
  for (; b < nb; ++b) {
    int32_t sum = 0;
    for (size_t j = 0; j < static_cast<size_t>(kQuantBlock); ++j) sum += q[b * kQuantBlock + j];
    sx[b] = dx[b] * static_cast<float>(sum);
  }
  for (; b % 16 != 0; ++b) sx[b] = 0.0f;
}

template <class Block>
HWY_INLINE void PrepareChunk(const float* x, size_t nb, WordChunk* c) {
  QuantizeActivations(x, nb, c->q, c->dx);
  if constexpr (kHasMin<Block>) BlockCodeSums(c->q, c->dx, nb, c->sx);
}

// Scale scratch of the int16 path: per row group the f32 block scales of
// each row, per tile their products with each vector's scales.
struct WordScales {
  HWY_ALIGN uint16_t bits[kChunkBlocks];
  HWY_ALIGN float dw[kTileRows][kChunkBlocks];
  HWY_ALIGN float mw[kTileRows][kChunkBlocks];               // [row][block] mins (kHasMin only)
  HWY_ALIGN float s[kTileRows * kTileVecs * kChunkBlocks];  // [row][vec][block] dw·dx

  template <class Block>
  HWY_INLINE void SetRow(size_t i, const Block* w, size_t nb) {
    BlockScales(w, nb, bits, dw[i]);
    if constexpr (kHasMin<Block>) BlockScales(w, nb, bits, mw[i], &Block::m);
  }
};

// Tile kernel of the int16 path (QuantTile) on prepared word chunks; on
// AVX2 the byte tile for the types it covers.
template <class Block, size_t R, size_t V>
HWY_INLINE void TileKernel(const Block* const* w, const WordChunk* const* xc, const float* s, size_t nb,
                           size_t prefetch_ahead, float* out) {
  const int16_t* xq[V];
  for (size_t v = 0; v < V; ++v) xq[v] = xc[v]->q;
#if HWY_TARGET == HWY_AVX2
  if constexpr (kAvx2LegacyBytes<Block>) return Avx2ByteTile<Block, R, V>(w, xq, s, nb, prefetch_ahead, out);
#endif
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
// the decode (Q4_0: vpermt2b + one GF(2) affine op; Q8_0: vpermt2b + xor;
// the others below) and the two scale ops. Q4_1/Q5_1 add their min term
// m·dx·Σq as one more FMA per (row, vector, pair): each of a block's 8 lanes
// takes m·(dx·Σq/8). KVEDGE_ATTR_VNNI512 (simd/x86_vnni.h) adds the VNNI
// and GFNI features to functions using them.
constexpr size_t kPairCodes = 64;  // int8 activation codes per pair
constexpr size_t kPairLanes = 16;  // int32 lanes per pair
constexpr size_t kChunkPairs = kChunkBlocks / 2;

// One input vector's activations over one column chunk, in pair order.
struct ByteChunk {
  HWY_ALIGN int8_t q[kChunkPairs * kPairCodes];      // [pair][64] codes, lane order
  HWY_ALIGN int32_t init[kChunkPairs * kPairLanes];  // [pair][lane] −offset·Σ of the lane's 4 codes
  HWY_ALIGN float dx[kChunkBlocks];                  // [chunk blocks] scales
  HWY_ALIGN float sx8[kChunkBlocks];                 // [chunk blocks] dx·Σq/8 (kHasMin only)
};

HWY_INLINE __m512i LoadConst(const uint8_t (&bytes)[64]) { return _mm512_loadu_si512(bytes); }

// The f16 block scales at words `first` and `second` of a loaded pair, as
// f32 in the lane pattern (d[b], d[b+1], d[b], …): one word permute, one
// convert. Converting in the tile beats a per-row pass over the scales
// (which costs a scalar phase per row: decode 59 vs 52.5 ms/token on
// TinyLlama q4_0). Also the mins of Q4_1/Q5_1 (the words after).
HWY_INLINE __m512 PairHalves(__m512i pair, int second, int first = 0) {
  const __m512i idx = _mm512_set1_epi32(first | second << 16);
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

// GF(2) affine matrices (row i is byte 7 − i) that keep a byte's low nibble
// or move its high nibble down.
constexpr long long kLowNibble = 0x0102040800000000ll;   // bit i ← bit i, i < 4
constexpr long long kHighNibble = 0x1020408000000000ll;  // bit i ← bit i + 4

// Lane-order bytes with the qs nibbles of a pair: weight j and j + 16 share a
// byte, the upper 32 bytes take its high nibble (one GF(2) affine op).
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i PairNibbles(__m512i bytes) {
  const __m512i nibble = _mm512_set_epi64(kHighNibble, kHighNibble, kHighNibble, kHighNibble, kLowNibble,
                                          kLowNibble, kLowNibble, kLowNibble);
  return _mm512_gf2p8affine_epi64_epi8(bytes, nibble, 0);
}

// The pair's bytes: both blocks (two) or the first only, zero beyond; one
// masked load (kBytes: bytes per block, 2·kBytes ≤ 64).
template <size_t kBytes>
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i LoadPair(const void* w, bool two) {
  const __mmask64 mask = two ? (1ull << (2 * kBytes)) - 1 : (1ull << kBytes) - 1;
  return _mm512_maskz_loadu_epi8(mask, w);
}

// The lane-order nibbles (0…15) of a pair of Q4_0-layout blocks (f16 d, 16
// qs bytes: Q4_0, IQ4_NL) and their scales. Reads only the pair's 36 (or 18)
// bytes.
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Q4Nibbles(const uint8_t* p, bool two, __m512* dw) {
  // qs byte j of block b is at 2 + j, of block b+1 at 20 + j (32 and up:
  // bytes 32–35 of the pair, in the second table at 64 + 0…3).
  static constexpr auto kIdx = MakeCodeIndex<2, 20, PairWeightQ4, 16, 32>();
  const __m512i lo = two ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))
                         : _mm512_maskz_loadu_epi8(0x3FFFFull, p);
  const __m512i hi = _mm512_castsi128_si512(_mm_cvtsi32_si128(two ? LoadU32(p + 32) : 0));
  *dw = PairHalves(lo, 9);
  return PairNibbles(_mm512_permutex2var_epi8(lo, LoadConst(kIdx.idx), hi));
}

// The fifth bits of a Q5 pair (qh of block b at byte kQh, of b+1 at kBytes +
// kQh) as a byte mask in lane order: the 8 qh bytes go to every 64-bit lane
// (one byte permute), then vpshufbitqmb picks bit 32·block + weight for
// each byte.
template <size_t kQh, size_t kBytes>
KVEDGE_ATTR_VNNI512 HWY_INLINE __mmask64 PairFifthBits(__m512i pair) {
  static constexpr auto kTables = [] {
    struct {
      alignas(64) uint8_t qh[64];
      alignas(64) uint8_t bit[64];
    } t{};
    for (size_t i = 0; i < 64; ++i) {
      const size_t k = i % 8;
      t.qh[i] = static_cast<uint8_t>(k < 4 ? kQh + k : kBytes + kQh + k - 4);
      t.bit[i] = static_cast<uint8_t>(32 * PairBlock(i) + PairWeightQ4(i));
    }
    return t;
  }();
  const __m512i qh = _mm512_permutexvar_epi8(LoadConst(kTables.qh), pair);
  return _mm512_bitshuffle_epi64_mask(qh, LoadConst(kTables.bit));
}

// Q4_1/Q5_0/Q5_1: the lane-order codes (0…15 or 0…31) of a pair of blocks
// of kBytes bytes with f16 d at 0, (kMin) f16 m at 2, (kQh ≥ 0) 4 qh bytes
// at kQh and 16 qs bytes at kQs; dw and (kMin) mw in the pair lane pattern.
template <size_t kBytes, bool kMin, int kQh, size_t kQs>
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i DecodeNibblePair(const void* w, bool two, __m512* dw, __m512* mw) {
  static constexpr auto kIdx = MakeCodeIndex<kQs, kBytes + kQs, PairWeightQ4, 16, 64>();
  const __m512i pair = LoadPair<kBytes>(w, two);
  constexpr int kSecond = static_cast<int>(kBytes / 2);  // word of block b+1's d
  *dw = PairHalves(pair, kSecond);
  if constexpr (kMin) *mw = PairHalves(pair, kSecond + 1, 1);
  const __m512i codes = PairNibbles(_mm512_permutexvar_epi8(LoadConst(kIdx.idx), pair));
  if constexpr (kQh < 0) {
    return codes;
  } else {
    return _mm512_mask_add_epi8(codes, PairFifthBits<kQh, kBytes>(pair), codes, _mm512_set1_epi8(16));
  }
}

template <>
struct BytePair<BlockQ4_0> {
  static constexpr int32_t kOffset = 8;  // codes are w + 8
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }

  // Codes of w[0] and (if two) w[1] as unsigned bytes in lane order.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ4_0* w, bool two, __m512* dw, __m512*) {
    return Q4Nibbles(reinterpret_cast<const uint8_t*>(w), two, dw);
  }
};

template <>
struct BytePair<BlockIQ4_NL> {
  static constexpr int32_t kOffset = 128;  // codes are value + 128
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }

  // Q4_0's nibbles, then the codebook (+ 128) by one byte shuffle.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockIQ4_NL* w, bool two, __m512* dw, __m512*) {
    static constexpr auto kTable = [] {
      struct {
        alignas(64) uint8_t v[64];
      } t{};
      for (size_t i = 0; i < 64; ++i) t.v[i] = static_cast<uint8_t>(kIq4nlValues[i % 16] + 128);
      return t;
    }();
    return _mm512_shuffle_epi8(LoadConst(kTable.v), Q4Nibbles(reinterpret_cast<const uint8_t*>(w), two, dw));
  }
};

// Q4_1, Q5_0, Q5_1: DecodeNibblePair on the block's own layout. Q5_0's
// codes are w + 16; Q4_1/Q5_1 codes are q of w = d·q + m, as they are.
template <class Block>
  requires(std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>)
struct BytePair<Block> {
  static constexpr bool kFifthBit = requires(const Block& b) { b.qh; };
  static constexpr int32_t kOffset = kFifthBit && !kHasMin<Block> ? 16 : 0;
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const Block* w, bool two, __m512* dw, __m512* mw) {
    constexpr int kQh = [] {
      if constexpr (kFifthBit) {
        return static_cast<int>(offsetof(Block, qh));
      } else {
        return -1;
      }
    }();
    return DecodeNibblePair<sizeof(Block), kHasMin<Block>, kQh, offsetof(Block, qs)>(w, two, dw, mw);
  }
};

template <>
struct BytePair<BlockQ8_0> {
  static constexpr int32_t kOffset = 128;  // codes are w + 128
  static constexpr size_t Weight(size_t i) { return PairWeightQ8(i); }

  // Reads only the pair's 68 (or 34) bytes: 64 in one load, 4 more.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ8_0* w, bool two, __m512* dw, __m512*) {
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
  if constexpr (kHasMin<Block>) {
    // 1/8: each of a block's 8 lanes of a pair takes an eighth (exact).
    for (size_t b = 0; b < nb; ++b) {
      int32_t sum = 0;
      for (size_t j = 0; j < static_cast<size_t>(kQuantBlock); ++j) sum += q16[b * kQuantBlock + j];
      c->sx8[b] = c->dx[b] * static_cast<float>(sum) * 0.125f;
    }
    if (nb % 2 != 0) c->sx8[nb] = 0.0f;
  }
  for (size_t p = 0; p < (nb + 1) / 2; ++p) {
    const size_t b = 2 * p;
    const bool two = b + 1 < nb;
    int8_t* q = c->q + p * kPairCodes;
    for (size_t i = 0; i < kPairCodes; ++i) {
      const size_t blk = PairBlock(i);
      q[i] = blk == 0 || two ? static_cast<int8_t>(q16[(b + blk) * kQuantBlock + BytePair<Block>::Weight(i)]) : 0;
    }
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), _mm512_load_si512(q));
    _mm512_store_si512(c->init + p * kPairLanes, _mm512_mullo_epi32(sums, _mm512_set1_epi32(-BytePair<Block>::kOffset)));
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
    __m512 dw, mw;
    const __m512i codes = BytePair<Block>::Decode(w[r] + 2 * p, two, &dw, &mw);
    for (size_t v = 0; v < V; ++v) {
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(xc[v]->init + p * kPairLanes), codes, xv[v]);
      const __m512 scale = _mm512_mul_ps(dw, PairBroadcast(xc[v]->dx + 2 * p));
      acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[r][v]);
      if constexpr (kHasMin<Block>) acc[r][v] = _mm512_fmadd_ps(mw, PairBroadcast(xc[v]->sx8 + 2 * p), acc[r][v]);
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
  if constexpr (kHasMin<Block>) {
    for (size_t i = 0; i < nr; ++i) {
      for (size_t j = 0; j < tv; ++j) out[i * tv + j] += MinDot(sc.mw[i], xc[j]->sx, nb);
    }
  }
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
    case WeightType::kQ4_1: return QuantMatVecRows<BlockQ4_1>(m, x, y, row_begin, row_end);
    case WeightType::kQ5_0: return QuantMatVecRows<BlockQ5_0>(m, x, y, row_begin, row_end);
    case WeightType::kQ5_1: return QuantMatVecRows<BlockQ5_1>(m, x, y, row_begin, row_end);
    case WeightType::kIQ4_NL: return QuantMatVecRows<BlockIQ4_NL>(m, x, y, row_begin, row_end);
    default: HWY_ABORT("%s: not a kInt8 weight type", WeightTypeName(m.type));
  }
}

void MatMulRowsLegacyT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kQ8_0: return QuantMatMulRows<BlockQ8_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_0: return QuantMatMulRows<BlockQ4_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_1: return QuantMatMulRows<BlockQ4_1>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_0: return QuantMatMulRows<BlockQ5_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_1: return QuantMatMulRows<BlockQ5_1>(m, x, n, y, row_begin, row_end);
    case WeightType::kIQ4_NL: return QuantMatMulRows<BlockIQ4_NL>(m, x, n, y, row_begin, row_end);
    default: HWY_ABORT("%s: not a kInt8 weight type", WeightTypeName(m.type));
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
