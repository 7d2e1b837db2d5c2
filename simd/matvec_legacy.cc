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
#include "simd/arm_dotprod.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_legacy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

// Per-target helpers.
#include "simd/legacy_int-inl.h"
#include "simd/matvec_legacy_arm-inl.h"  // ARM sdot/svdot tiles (KVEDGE_HWY_ARM_DOT_TARGET)

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
#if KVEDGE_HWY_ARM_DOT_TARGET
  int8_t q8[kChunkCols];  // [chunk cols] the codes as int8 (ArmDotTile)
#endif
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
#if KVEDGE_HWY_ARM_DOT_TARGET
  if (UseArmDot()) {
    for (size_t i = 0; i < nb * kQuantBlock; ++i) c->q8[i] = static_cast<int8_t>(c->q[i]);
  }
#endif
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

// Tile kernel of the int16 path (QuantTile) on prepared word chunks; on ARM
// the sdot/svdot tile (matvec_legacy_arm-inl.h) where the CPU has it, on
// AVX2 the byte tile for the types it covers.
template <class Block, size_t R, size_t V>
HWY_INLINE void TileKernel(const Block* const* w, const WordChunk* const* xc, const float* s, size_t nb,
                           size_t prefetch_ahead, float* out) {
#if KVEDGE_HWY_ARM_DOT_TARGET
  if (UseArmDot()) {
    const int8_t* xq8[V];
    for (size_t v = 0; v < V; ++v) xq8[v] = xc[v]->q8;
    return ArmDotTile<Block, R, V>(w, xq8, s, nb, prefetch_ahead, out);
  }
#endif
  const int16_t* xq[V];
  for (size_t v = 0; v < V; ++v) xq[v] = xc[v]->q;
#if HWY_TARGET == HWY_AVX2
  if constexpr (kAvx2LegacyBytes<Block>) return Avx2ByteTile<Block, R, V>(w, xq, s, nb, prefetch_ahead, out);
#endif
  QuantTile<Block, R, V>(w, xq, s, nb, prefetch_ahead, out);
}

#if HWY_TARGET == HWY_AVX3_DL
#include "simd/matvec_legacy_avx512-inl.h"  // ByteChunk, ByteScales, RunTile on bytes
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
