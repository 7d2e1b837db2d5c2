// Model kernels (matvec/matmul over f32/f16/bf16/Q8_0/Q4_0 weights, RMSNorm,
// SwiGLU, adds) compiled once per Highway target and dispatched at run time.
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
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simd/model_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/model_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Activations are quantized in chunks of this many 32-blocks (4096 columns):
// 8 KiB of int16 codes + 512 B of scales per input vector on the stack.
constexpr size_t kChunkBlocks = 128;
constexpr size_t kChunkCols = kChunkBlocks * kQuantBlock;
// MatMul quantizes this many input vectors at a time (64 KiB of stack codes)
// and streams the weights once per tile.
constexpr size_t kMatMulTile = 8;

// ------------------------------ scalar helpers

HWY_INLINE float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
HWY_INLINE uint32_t FloatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// Exact IEEE half → float for every input (zero, subnormal, inf, nan), branch
// free (Maratos' FP16 algorithm): a few integer ops per Q8_0/Q4_0 block scale,
// much cheaper than the out-of-line reference F32FromF16.
HWY_INLINE float HalfToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  // Normal (and inf/nan): move the exponent, rebias by 2^-112.
  const float normalized = BitsToFloat((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  // Subnormal: place the mantissa under a 0.5 exponent and subtract 0.5.
  const float denormalized = BitsToFloat((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? FloatToBits(denormalized) : FloatToBits(normalized);
  return BitsToFloat(sign | magnitude);
}

HWY_INLINE float ScalarWeight(const float* p) { return *p; }
HWY_INLINE float ScalarWeight(const hwy::float16_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return HalfToFloat(bits);
}
HWY_INLINE float ScalarWeight(const hwy::bfloat16_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

// ------------------------------ float weights

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const hwy::float16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}

// Horizontal sum of one pair's accumulator plus its scalar column tail
// [c, cols); identical for every tile shape.
template <class DF, typename WT>
HWY_INLINE float FinishFloatPair(DF df, hn::Vec<DF> acc, const WT* w, const float* x, size_t c, size_t cols) {
  float sum = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; c < cols; ++c) sum += ScalarWeight(w + c) * x[c];
  return sum;
}

// out = Σ_c w[c]·x[c]: one weight row, one input vector. w: [cols] WT.
template <typename WT>
HWY_INLINE float FloatDot(const WT* w, const float* x, size_t cols) {
  const hn::ScalableTag<float> df;
  const size_t n = hn::Lanes(df);
  auto acc = hn::Zero(df);
  size_t c = 0;
  for (; c + n <= cols; c += n) acc = hn::MulAdd(LoadWeights(df, w + c), hn::LoadU(df, x + c), acc);
  return FinishFloatPair(df, acc, w, x, c, cols);
}

// out[i] = row w_i · x for four rows: x loaded once per step, four
// independent FMA chains hide the FMA latency.
template <typename WT>
HWY_INLINE void FloatDotRows4(const WT* w0, const WT* w1, const WT* w2, const WT* w3, const float* x, size_t cols,
                              float* out) {
  const hn::ScalableTag<float> df;
  const size_t n = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  size_t c = 0;
  for (; c + n <= cols; c += n) {
    const auto xv = hn::LoadU(df, x + c);
    a0 = hn::MulAdd(LoadWeights(df, w0 + c), xv, a0);
    a1 = hn::MulAdd(LoadWeights(df, w1 + c), xv, a1);
    a2 = hn::MulAdd(LoadWeights(df, w2 + c), xv, a2);
    a3 = hn::MulAdd(LoadWeights(df, w3 + c), xv, a3);
  }
  out[0] = FinishFloatPair(df, a0, w0, x, c, cols);
  out[1] = FinishFloatPair(df, a1, w1, x, c, cols);
  out[2] = FinishFloatPair(df, a2, w2, x, c, cols);
  out[3] = FinishFloatPair(df, a3, w3, x, c, cols);
}

// out[i] = w · x_i for four input vectors: each weight vector is loaded and
// widened once and used four times (prefill).
template <typename WT>
HWY_INLINE void FloatDotVecs4(const WT* w, const float* x0, const float* x1, const float* x2, const float* x3,
                              size_t cols, float* out) {
  const hn::ScalableTag<float> df;
  const size_t n = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  size_t c = 0;
  for (; c + n <= cols; c += n) {
    const auto wv = LoadWeights(df, w + c);
    a0 = hn::MulAdd(wv, hn::LoadU(df, x0 + c), a0);
    a1 = hn::MulAdd(wv, hn::LoadU(df, x1 + c), a1);
    a2 = hn::MulAdd(wv, hn::LoadU(df, x2 + c), a2);
    a3 = hn::MulAdd(wv, hn::LoadU(df, x3 + c), a3);
  }
  out[0] = FinishFloatPair(df, a0, w, x0, c, cols);
  out[1] = FinishFloatPair(df, a1, w, x1, c, cols);
  out[2] = FinishFloatPair(df, a2, w, x2, c, cols);
  out[3] = FinishFloatPair(df, a3, w, x3, c, cols);
}

template <typename WT>
void FloatMatVecRows(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  const WT* w = static_cast<const WT*>(m.data);  // [rows][cols]
  const size_t cols = m.cols;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const WT* w0 = w + r * cols;
    FloatDotRows4(w0, w0 + cols, w0 + 2 * cols, w0 + 3 * cols, x, cols, y + r);
  }
  for (; r < row_end; ++r) y[r] = FloatDot(w + r * cols, x, cols);
}

// Y[n][rows] for rows [row_begin, row_end): the weight row stays in L1 while
// all n input vectors (from L2) pass over it, so weights stream once per call.
template <typename WT>
void FloatMatMulRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  const WT* w = static_cast<const WT*>(m.data);  // [rows][cols]
  const size_t cols = m.cols;
  const size_t rows = m.rows;
  for (size_t r = row_begin; r < row_end; ++r) {
    const WT* wr = w + r * cols;
    size_t v = 0;
    for (; v + 4 <= n; v += 4) {
      float out[4];
      const float* xv = x + v * cols;
      FloatDotVecs4(wr, xv, xv + cols, xv + 2 * cols, xv + 3 * cols, cols, out);
      for (size_t i = 0; i < 4; ++i) y[(v + i) * rows + r] = out[i];
    }
    for (; v < n; ++v) y[v * rows + r] = FloatDot(wr, x + v * cols, cols);
  }
}

// ------------------------------ quantized weights, int8 activations

// 16 int16 lanes at most: a Q4_0 block holds 16 bytes, so one load fills a
// vector on AVX2/AVX3/SVE-256 and NEON/SSE take two steps. Lanes(D16) is a
// power of two ≤ 16, so it divides the 16-element half-blocks.
using D16 = hn::CappedTag<int16_t, 16>;
using D32 = hn::Repartition<int32_t, D16>;
using DF32 = hn::Repartition<float, D16>;
using V16 = hn::Vec<D16>;
using V32 = hn::Vec<D32>;
using VF32 = hn::Vec<DF32>;

// Weights [k, k+N) and [16+k, 16+k+N) of a block as int16 in [−128, 127].
HWY_INLINE void DecodeChunk(D16 d16, const BlockQ8_0& blk, size_t k, V16& lo, V16& hi) {
  const hn::Rebind<int8_t, D16> d8;
  lo = hn::PromoteTo(d16, hn::LoadU(d8, blk.qs + k));
  hi = hn::PromoteTo(d16, hn::LoadU(d8, blk.qs + kQuantBlock / 2 + k));
}
HWY_INLINE void DecodeChunk(D16 d16, const BlockQ4_0& blk, size_t k, V16& lo, V16& hi) {
  const hn::Rebind<uint8_t, D16> du8;
  const V16 bytes = hn::PromoteTo(d16, hn::LoadU(du8, blk.qs + k));
  const V16 eight = hn::Set(d16, 8);
  lo = hn::Sub(hn::And(bytes, hn::Set(d16, 15)), eight);
  hi = hn::Sub(hn::ShiftRight<4>(bytes), eight);
}

// s0/s1 += widened products; exact (|w·x| ≤ 128·127, 32 terms per block).
HWY_INLINE void MulAccChunk(D32 d32, V16 lo, V16 hi, V16 xl, V16 xh, V32& s0, V32& s1) {
  s0 = hn::ReorderWidenMulAccumulate(d32, lo, xl, s0, s1);
  s0 = hn::ReorderWidenMulAccumulate(d32, hi, xh, s0, s1);
}

// acc += f32(Σ block) · (dw·dx): the only rounding per block.
HWY_INLINE VF32 AccumulateBlock(V32 s0, V32 s1, float scale, VF32 acc) {
  const DF32 df;
  return hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(s0, s1)), hn::Set(df, scale), acc);
}

// Quantizes x: [nb·32] f32 to q: [nb·32] int8 codes held in int16 and
// dx: [nb] f32 scales, as ref::QuantizeActivations (dx = amax/127,
// q = nearest-even(x·(1/dx))). Cost O(nb·32), once per call and chunk.
HWY_INLINE void QuantizeActivations(const float* x, size_t nb, int16_t* q, float* dx) {
  const hn::CappedTag<float, 16> df;  // ≤ 16 lanes, divides 32
  const hn::Rebind<int16_t, decltype(df)> di16;
  const size_t n = hn::Lanes(df);
  for (size_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQuantBlock;
    auto amax = hn::Zero(df);
    for (size_t j = 0; j < kQuantBlock; j += n) amax = hn::Max(amax, hn::Abs(hn::LoadU(df, xb + j)));
    const float d = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dx[b] = d;
    const auto vid = hn::Set(df, id);
    for (size_t j = 0; j < kQuantBlock; j += n) {
      const auto codes = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + j), vid));
      hn::StoreU(hn::DemoteTo(di16, codes), di16, q + b * kQuantBlock + j);
    }
  }
}

// Σ over blocks [0, nb) of one row with one quantized vector.
// w: [nb] blocks; xq: [nb·32] codes; dx: [nb] scales.
template <class Block>
HWY_INLINE float QuantDot(const Block* w, const int16_t* xq, const float* dx, size_t nb) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t n = hn::Lanes(d16);
  VF32 acc = hn::Zero(df);
  for (size_t b = 0; b < nb; ++b) {
    const int16_t* xb = xq + b * kQuantBlock;
    V32 s0 = hn::Zero(d32), s1 = hn::Zero(d32);
    for (size_t k = 0; k < kQuantBlock / 2; k += n) {
      const V16 xl = hn::LoadU(d16, xb + k);
      const V16 xh = hn::LoadU(d16, xb + kQuantBlock / 2 + k);
      V16 lo, hi;
      DecodeChunk(d16, w[b], k, lo, hi);
      MulAccChunk(d32, lo, hi, xl, xh, s0, s1);
    }
    acc = AccumulateBlock(s0, s1, HalfToFloat(w[b].d) * dx[b], acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// Four rows, one quantized vector: activation codes loaded once per step.
// prefetch_ahead (blocks, 0 = off): each row stream prefetches that far ahead.
// The int decode costs ~10x more instructions per cache line than an f32 FMA,
// so the out-of-order window alone keeps too few DRAM lines in flight;
// prefetching the same block 4 rows later (the next row group) fixes that.
template <class Block>
HWY_INLINE void QuantDotRows4(const Block* w0, const Block* w1, const Block* w2, const Block* w3,
                              const int16_t* xq, const float* dx, size_t nb, size_t prefetch_ahead, float* out) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t n = hn::Lanes(d16);
  VF32 a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  for (size_t b = 0; b < nb; ++b) {
    if (prefetch_ahead != 0) {
      hwy::Prefetch(w0 + b + prefetch_ahead);
      hwy::Prefetch(w1 + b + prefetch_ahead);
      hwy::Prefetch(w2 + b + prefetch_ahead);
      hwy::Prefetch(w3 + b + prefetch_ahead);
    }
    const int16_t* xb = xq + b * kQuantBlock;
    V32 s00 = hn::Zero(d32), s01 = hn::Zero(d32), s10 = hn::Zero(d32), s11 = hn::Zero(d32);
    V32 s20 = hn::Zero(d32), s21 = hn::Zero(d32), s30 = hn::Zero(d32), s31 = hn::Zero(d32);
    for (size_t k = 0; k < kQuantBlock / 2; k += n) {
      const V16 xl = hn::LoadU(d16, xb + k);
      const V16 xh = hn::LoadU(d16, xb + kQuantBlock / 2 + k);
      V16 lo, hi;
      DecodeChunk(d16, w0[b], k, lo, hi);
      MulAccChunk(d32, lo, hi, xl, xh, s00, s01);
      DecodeChunk(d16, w1[b], k, lo, hi);
      MulAccChunk(d32, lo, hi, xl, xh, s10, s11);
      DecodeChunk(d16, w2[b], k, lo, hi);
      MulAccChunk(d32, lo, hi, xl, xh, s20, s21);
      DecodeChunk(d16, w3[b], k, lo, hi);
      MulAccChunk(d32, lo, hi, xl, xh, s30, s31);
    }
    a0 = AccumulateBlock(s00, s01, HalfToFloat(w0[b].d) * dx[b], a0);
    a1 = AccumulateBlock(s10, s11, HalfToFloat(w1[b].d) * dx[b], a1);
    a2 = AccumulateBlock(s20, s21, HalfToFloat(w2[b].d) * dx[b], a2);
    a3 = AccumulateBlock(s30, s31, HalfToFloat(w3[b].d) * dx[b], a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(df, a0));
  out[1] = hn::GetLane(hn::SumOfLanes(df, a1));
  out[2] = hn::GetLane(hn::SumOfLanes(df, a2));
  out[3] = hn::GetLane(hn::SumOfLanes(df, a3));
}

// One row, four quantized vectors: each weight chunk is decoded once and
// multiplied four times (prefill). xq: [4][kChunkCols]; dx: [4][kChunkBlocks].
template <class Block>
HWY_INLINE void QuantDotVecs4(const Block* w, const int16_t* xq, const float* dx, size_t nb, float* out) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t n = hn::Lanes(d16);
  const int16_t* xq1 = xq + kChunkCols;
  const int16_t* xq2 = xq + 2 * kChunkCols;
  const int16_t* xq3 = xq + 3 * kChunkCols;
  VF32 a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  for (size_t b = 0; b < nb; ++b) {
    const size_t o = b * kQuantBlock;
    V32 s00 = hn::Zero(d32), s01 = hn::Zero(d32), s10 = hn::Zero(d32), s11 = hn::Zero(d32);
    V32 s20 = hn::Zero(d32), s21 = hn::Zero(d32), s30 = hn::Zero(d32), s31 = hn::Zero(d32);
    for (size_t k = 0; k < kQuantBlock / 2; k += n) {
      V16 lo, hi;
      DecodeChunk(d16, w[b], k, lo, hi);
      const size_t l = o + k, h = o + kQuantBlock / 2 + k;
      MulAccChunk(d32, lo, hi, hn::LoadU(d16, xq + l), hn::LoadU(d16, xq + h), s00, s01);
      MulAccChunk(d32, lo, hi, hn::LoadU(d16, xq1 + l), hn::LoadU(d16, xq1 + h), s10, s11);
      MulAccChunk(d32, lo, hi, hn::LoadU(d16, xq2 + l), hn::LoadU(d16, xq2 + h), s20, s21);
      MulAccChunk(d32, lo, hi, hn::LoadU(d16, xq3 + l), hn::LoadU(d16, xq3 + h), s30, s31);
    }
    const float dw = HalfToFloat(w[b].d);
    a0 = AccumulateBlock(s00, s01, dw * dx[b], a0);
    a1 = AccumulateBlock(s10, s11, dw * dx[b + kChunkBlocks], a1);
    a2 = AccumulateBlock(s20, s21, dw * dx[b + 2 * kChunkBlocks], a2);
    a3 = AccumulateBlock(s30, s31, dw * dx[b + 3 * kChunkBlocks], a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(df, a0));
  out[1] = hn::GetLane(hn::SumOfLanes(df, a1));
  out[2] = hn::GetLane(hn::SumOfLanes(df, a2));
  out[3] = hn::GetLane(hn::SumOfLanes(df, a3));
}

// y[r] for rows [row_begin, row_end). Column chunks beyond the first add into
// y (in chunk order, the same for every tile shape).
template <class Block>
void QuantMatVecRows(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  const size_t nb_row = m.cols / kQuantBlock;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/32] blocks
  HWY_ALIGN int16_t xq[kChunkCols];                      // [chunk cols] codes
  HWY_ALIGN float dx[kChunkBlocks];                      // [chunk blocks] scales
  for (size_t cb = 0; cb < nb_row; cb += kChunkBlocks) {
    const size_t nb = std::min(kChunkBlocks, nb_row - cb);
    QuantizeActivations(x + cb * kQuantBlock, nb, xq, dx);
    size_t r = row_begin;
    for (; r + 4 <= row_end; r += 4) {
      const Block* w0 = w + r * nb_row + cb;
      float out[4];
      // The next group (4 rows on) if it is inside this call's rows.
      const size_t prefetch_ahead = r + 8 <= row_end ? 4 * nb_row : 0;
      QuantDotRows4(w0, w0 + nb_row, w0 + 2 * nb_row, w0 + 3 * nb_row, xq, dx, nb, prefetch_ahead, out);
      for (size_t i = 0; i < 4; ++i) y[r + i] = cb == 0 ? out[i] : y[r + i] + out[i];
    }
    for (; r < row_end; ++r) {
      const float out = QuantDot(w + r * nb_row + cb, xq, dx, nb);
      y[r] = cb == 0 ? out : y[r] + out;
    }
  }
}

// Y[n][rows] for rows [row_begin, row_end): tiles of kMatMulTile input
// vectors are quantized on the stack, then each weight row streams once per
// tile, decoded once per group of four vectors.
template <class Block>
void QuantMatMulRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  const size_t nb_row = m.cols / kQuantBlock;
  const size_t rows = m.rows;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/32] blocks
  HWY_ALIGN int16_t xq[kMatMulTile * kChunkCols];        // [tile vector][chunk cols] codes
  HWY_ALIGN float dx[kMatMulTile * kChunkBlocks];        // [tile vector][chunk blocks] scales
  for (size_t v0 = 0; v0 < n; v0 += kMatMulTile) {
    const size_t nv = std::min(kMatMulTile, n - v0);
    for (size_t cb = 0; cb < nb_row; cb += kChunkBlocks) {
      const size_t nb = std::min(kChunkBlocks, nb_row - cb);
      for (size_t v = 0; v < nv; ++v) {
        QuantizeActivations(x + (v0 + v) * m.cols + cb * kQuantBlock, nb, xq + v * kChunkCols,
                            dx + v * kChunkBlocks);
      }
      for (size_t r = row_begin; r < row_end; ++r) {
        const Block* wr = w + r * nb_row + cb;
        size_t v = 0;
        for (; v + 4 <= nv; v += 4) {
          float out[4];
          QuantDotVecs4(wr, xq + v * kChunkCols, dx + v * kChunkBlocks, nb, out);
          for (size_t i = 0; i < 4; ++i) {
            float& dst = y[(v0 + v + i) * rows + r];
            dst = cb == 0 ? out[i] : dst + out[i];
          }
        }
        for (; v < nv; ++v) {
          const float out = QuantDot(wr, xq + v * kChunkCols, dx + v * kChunkBlocks, nb);
          float& dst = y[(v0 + v) * rows + r];
          dst = cb == 0 ? out : dst + out;
        }
      }
    }
  }
}

// ------------------------------ per-target entry points

void MatVecRowsT(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kF32: return FloatMatVecRows<float>(m, x, y, row_begin, row_end);
    case WeightType::kF16: return FloatMatVecRows<hwy::float16_t>(m, x, y, row_begin, row_end);
    case WeightType::kBF16: return FloatMatVecRows<hwy::bfloat16_t>(m, x, y, row_begin, row_end);
    case WeightType::kQ8_0: return QuantMatVecRows<BlockQ8_0>(m, x, y, row_begin, row_end);
    case WeightType::kQ4_0: return QuantMatVecRows<BlockQ4_0>(m, x, y, row_begin, row_end);
  }
}

void MatMulRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kF32: return FloatMatMulRows<float>(m, x, n, y, row_begin, row_end);
    case WeightType::kF16: return FloatMatMulRows<hwy::float16_t>(m, x, n, y, row_begin, row_end);
    case WeightType::kBF16: return FloatMatMulRows<hwy::bfloat16_t>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ8_0: return QuantMatMulRows<BlockQ8_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_0: return QuantMatMulRows<BlockQ4_0>(m, x, n, y, row_begin, row_end);
  }
}

void RmsNormT(const float* x, const float* weight, size_t n, float eps, float* out) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  auto acc = hn::Zero(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(df, x + i);
    acc = hn::MulAdd(v, v, acc);
  }
  float ss = hn::GetLane(hn::SumOfLanes(df, acc));
  for (size_t t = i; t < n; ++t) ss += x[t] * x[t];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const auto vscale = hn::Set(df, scale);
  for (i = 0; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + i), vscale), hn::LoadU(df, weight + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

// silu(g)·u with Highway's Exp (≤ 1 ulp on its range). −g is clamped to 88
// so e^−g stays finite; below g = −88 the true result is < 1e−36·|u|.
template <class DF>
HWY_INLINE hn::Vec<DF> SwiGluVec(DF df, hn::Vec<DF> g, hn::Vec<DF> u) {
  const auto e = hn::Exp(df, hn::Min(hn::Neg(g), hn::Set(df, 88.0f)));
  return hn::Mul(hn::Div(g, hn::Add(hn::Set(df, 1.0f), e)), u);
}

void SwiGluT(const float* gate, const float* up, size_t n, float* out) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(SwiGluVec(df, hn::LoadU(df, gate + i), hn::LoadU(df, up + i)), df, out + i);
  }
  if (i == n) return;
  // Tail through one padded vector so it gets the same math as the body.
  HWY_ALIGN float g[HWY_MAX_BYTES / sizeof(float)] = {};
  HWY_ALIGN float u[HWY_MAX_BYTES / sizeof(float)] = {};
  std::copy(gate + i, gate + n, g);
  std::copy(up + i, up + n, u);
  hn::Store(SwiGluVec(df, hn::Load(df, g), hn::Load(df, u)), df, g);
  std::copy(g, g + (n - i), out + i);
}

void AddInPlaceT(float* acc, const float* x, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(df, acc + i), hn::LoadU(df, x + i)), df, acc + i);
  }
  for (; i < n; ++i) acc[i] += x[i];
}

float DotF32T(const float* a, const float* b, size_t n) { return FloatDot(a, b, n); }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(MatVecRowsT);
HWY_EXPORT(MatMulRowsT);
HWY_EXPORT(RmsNormT);
HWY_EXPORT(SwiGluT);
HWY_EXPORT(AddInPlaceT);
HWY_EXPORT(DotF32T);

namespace {

// Quantized formats need whole blocks; anything else is a caller bug.
void CheckShape(const MatrixView& w) {
  const bool quantized = w.type == WeightType::kQ8_0 || w.type == WeightType::kQ4_0;
  if (quantized && w.cols % kQuantBlock != 0) {
    std::fprintf(stderr, "%s:%d: %s matrix has %zu columns, expected a multiple of %d\n", __FILE__, __LINE__,
                 WeightTypeName(w.type), w.cols, kQuantBlock);
    std::abort();
  }
}

}  // namespace

void MatVecRows(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  CheckShape(w);
  if (row_begin >= row_end) return;
  HWY_DYNAMIC_DISPATCH(MatVecRowsT)(w, x, y, row_begin, row_end);
}

void MatVec(const MatrixView& w, const float* x, float* y, ThreadArena* arena) {
  CheckShape(w);
  if (arena == nullptr || arena->num_threads() == 1) {
    HWY_DYNAMIC_DISPATCH(MatVecRowsT)(w, x, y, 0, w.rows);
    return;
  }
  // One dispatch per contiguous row range; each thread quantizes x itself
  // (O(cols), small next to its rows·cols weight stream).
  arena->ParallelFor(w.rows, [&](size_t begin, size_t end, int /*thread*/) {
    HWY_DYNAMIC_DISPATCH(MatVecRowsT)(w, x, y, begin, end);
  });
}

void MatMul(const MatrixView& w, const float* x, size_t n, float* y, ThreadArena* arena) {
  CheckShape(w);
  if (n == 0) return;
  if (arena == nullptr || arena->num_threads() == 1) {
    HWY_DYNAMIC_DISPATCH(MatMulRowsT)(w, x, n, y, 0, w.rows);
    return;
  }
  arena->ParallelFor(w.rows, [&](size_t begin, size_t end, int /*thread*/) {
    HWY_DYNAMIC_DISPATCH(MatMulRowsT)(w, x, n, y, begin, end);
  });
}

void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormT)(x, weight, n, eps, out);
}

void SwiGlu(const float* gate, const float* up, size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SwiGluT)(gate, up, n, out);
}

void AddInPlace(float* acc, const float* x, size_t n) { HWY_DYNAMIC_DISPATCH(AddInPlaceT)(acc, x, n); }

float DotF32(const float* a, const float* b, size_t n) { return HWY_DYNAMIC_DISPATCH(DotF32T)(a, b, n); }

}  // namespace kvedge
#endif  // HWY_ONCE
