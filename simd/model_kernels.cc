// Model kernels (matvec/matmul over f32/f16/bf16 weights and the legacy
// 32-weight blocks Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL, RMSNorm, SwiGLU, adds)
// compiled once per Highway target and dispatched at run time.
// Q4_K/Q5_K/Q6_K run in matvec_kquant.cc, the other block formats (Q2_K,
// Q3_K, IQ4_XS) in matvec_blocks.cc.
//
// Weight products are memory-bound in decode: every kernel streams each weight
// byte once, with f32 accumulators. The legacy block formats take the
// integer path llama.cpp uses for its Q8_0/Q8_1 activations: x is quantized per
// block of 32 to int8 codes (held as int16) with an f32 scale, once per call
// and per 4096 columns (stack scratch, no heap), and each block's dot product
// is an exact int16×int16→int32 multiply-add of the weights' integer codes
// (ref::QuantCode: Q5 with the fifth bit, IQ4_NL through its codebook); only
// the per-block scale dw·dx, the min term of Q4_1/Q5_1 (m·dx·Σq, Σq the
// block's activation code sum) and the running sum are f32. Error versus the f32 product is
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

#include "simd/half_inline.h"
#include "simd/matmul_batch.h"
#include "simd/matvec_blocks.h"
#include "simd/matvec_kquant.h"
#include "simd/model_kernels.h"
#include "simd/x86_vnni.h"

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

// 16 f16 bit patterns → f32, exact for every input (zero, subnormal, inf,
// nan): vcvtph2ps on x86 from AVX2 on, elsewhere the bit trick of
// HalfToFloat on int32 lanes (~12 ops per 16 values instead of per value).
HWY_INLINE void HalvesToFloats(const uint16_t* bits, float* out) {
  const hn::CappedTag<float, 16> df;
  const size_t n = hn::Lanes(df);
  for (size_t i = 0; i < 16; i += n) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(bits + i))), df, out + i);
#else
    const hn::RebindToUnsigned<decltype(df)> du;
    const hn::Rebind<uint16_t, decltype(df)> du16;
    const auto wv = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, bits + i)));
    const auto sign = hn::And(wv, hn::Set(du, 0x80000000u));
    const auto two_w = hn::Add(wv, wv);
    const auto normalized = hn::Mul(hn::BitCast(df, hn::Add(hn::ShiftRight<4>(two_w), hn::Set(du, 0xE0u << 23))),
                                    hn::Set(df, 0x1.0p-112f));
    const auto denormalized =
        hn::Sub(hn::BitCast(df, hn::Or(hn::ShiftRight<17>(two_w), hn::Set(du, 126u << 23))), hn::Set(df, 0.5f));
    const auto is_denormal = hn::Eq(hn::ShiftRight<27>(two_w), hn::Zero(du));
    const auto magnitude = hn::IfThenElse(is_denormal, hn::BitCast(du, denormalized), hn::BitCast(du, normalized));
    hn::StoreU(hn::BitCast(df, hn::Or(sign, magnitude)), df, out + i);
#endif
  }
}

// dw: [nb rounded up to 16] f32 = the f16 block scales (or, with `field`,
// the mins) of one row, 0 past nb.
// Scalar loads of the 16-bit scales, then 16 at a time through
// HalvesToFloats. (A gather of the block starts was tried: gathers stall on
// lines still in flight from DRAM, and cut Q8_0 matvec from DRAM to 40% of
// this path's speed.) bits: [kChunkBlocks] scratch; nb ≤ kChunkBlocks.
template <class Block>
HWY_INLINE void BlockScales(const Block* w, size_t nb, uint16_t* bits, float* dw, uint16_t Block::*field = &Block::d) {
  size_t b = 0;
  for (; b < nb; ++b) {
    // One scalar load and store each: without the barrier GCC merges these
    // into vpinsrw chains on x86, which occupy vector ports (perf showed
    // them as a third of decode when the AVX3_DL path still used this pass).
    uint32_t d = w[b].*field;
    asm("" : "+r"(d));
    bits[b] = static_cast<uint16_t>(d);
  }
  for (; b % 16 != 0; ++b) bits[b] = 0;
  for (b = 0; b < nb; b += 16) HalvesToFloats(bits + b, dw + b);
}

// Σ_b m[b]·sx[b] over b < nb, m and sx zero up to nb rounded to 16: a
// row's mins against a vector's dx·Σq (kHasMin), the same sum in every
// tile shape.
HWY_INLINE float MinDot(const float* m, const float* sx, size_t nb) {
  const hn::CappedTag<float, 16> df;
  const size_t n = hn::Lanes(df);
  auto acc = hn::Zero(df);
  for (size_t b = 0; b < nb; b += n) acc = hn::MulAdd(hn::LoadU(df, m + b), hn::LoadU(df, sx + b), acc);
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// s[b] = dw[b]·dx[b] (one f32 rounding, the same in every tile shape).
HWY_INLINE void MulScales(const float* dw, const float* dx, size_t nb, float* s) {
  const hn::CappedTag<float, 16> df;
  const size_t n = hn::Lanes(df);
  for (size_t b = 0; b < nb; b += n) hn::StoreU(hn::Mul(hn::LoadU(df, dw + b), hn::LoadU(df, dx + b)), df, s + b);
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

// Tile kernel of the int16 path (QuantTile) on prepared word chunks.
// 4 unaligned bytes as one int32 (e.g. 4 int8 activation codes, broadcast
// against 4 code bytes of each row).
HWY_INLINE int32_t LoadU32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

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

template <>
struct BytePair<BlockQ4_1> {
  static constexpr int32_t kOffset = 0;
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ4_1* w, bool two, __m512* dw, __m512* mw) {
    return DecodeNibblePair<sizeof(BlockQ4_1), true, -1, offsetof(BlockQ4_1, qs)>(w, two, dw, mw);
  }
};

template <>
struct BytePair<BlockQ5_0> {
  static constexpr int32_t kOffset = 16;  // codes are w + 16
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ5_0* w, bool two, __m512* dw, __m512* mw) {
    return DecodeNibblePair<sizeof(BlockQ5_0), false, offsetof(BlockQ5_0, qh), offsetof(BlockQ5_0, qs)>(w, two, dw,
                                                                                                       mw);
  }
};

template <>
struct BytePair<BlockQ5_1> {
  static constexpr int32_t kOffset = 0;
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ5_1* w, bool two, __m512* dw, __m512* mw) {
    return DecodeNibblePair<sizeof(BlockQ5_1), true, offsetof(BlockQ5_1, qh), offsetof(BlockQ5_1, qs)>(w, two, dw,
                                                                                                      mw);
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

// ------------------------------ interleaved Q8_0/Q4_0 (kInterleaved16)
//
// One row per int32 lane: for each block, the codes of 16 rows are a few
// contiguous 64-byte vectors and their 16 scales one 32-byte load, so each
// lane accumulates its row's exact integer block dot, then one convert and
// one FMA with dw·dx — no permutes, no horizontal sums. A matrix is one
// sequential stream, which the hardware prefetcher follows: software
// prefetch (2–16 KiB ahead, T0/T1/NTA) measured 10–25% slower from DRAM.
// Every (row, vector) pair runs the same op sequence (blocks in order, one
// f32 FMA each) in MatVec, in every MatMul tile and on every thread count.

template <class Block>
struct LaneFormat;
template <>
struct LaneFormat<BlockQ4_0> {
  static constexpr WeightType kType = WeightType::kQ4_0;
  static constexpr int32_t kOffset = 8;      // stored code = w + 8
};
template <>
struct LaneFormat<BlockQ8_0> {
  static constexpr WeightType kType = WeightType::kQ8_0;
  static constexpr int32_t kOffset = 128;    // stored code = w + 128
};

// One input vector's activations over one column chunk for the interleaved
// kernels: codes in column order (4 consecutive codes are broadcast against
// 4 code bytes of each row) and per block −offset·Σ codes, so that unsigned
// stored codes give exact signed dots.
struct LaneChunk {
  HWY_ALIGN int8_t q[kChunkCols];        // [chunk cols] int8 codes
  HWY_ALIGN int32_t corr[kChunkBlocks];  // [chunk blocks] −offset·Σ_j q
  HWY_ALIGN float dx[kChunkBlocks];      // [chunk blocks] scales
};

template <class Block>
HWY_NOINLINE void PrepareLaneChunk(const float* x, size_t nb, LaneChunk* c) {
  HWY_ALIGN int16_t q16[kChunkCols];  // [chunk cols] codes in column order
  QuantizeActivations(x, nb, q16, c->dx);
  for (size_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (size_t j = 0; j < static_cast<size_t>(kQuantBlock); ++j) {
      const int16_t v = q16[b * kQuantBlock + j];
      c->q[b * kQuantBlock + j] = static_cast<int8_t>(v);
      sum += v;
    }
    c->corr[b] = -LaneFormat<Block>::kOffset * sum;
  }
}

// Column offset (inside a block) of the 4 codes that stored code vector i
// of a block holds: Q4_0 vector 2j = low nibbles of bytes 4j…4j+3 (weights
// 4j…), 2j+1 = their high nibbles (weights 16+4j…); Q8_0 vector j: 4j….
template <class Block>
HWY_INLINE constexpr size_t LaneCodeColumn(size_t i) {
  if constexpr (LaneFormat<Block>::kType == WeightType::kQ4_0) return (i & 1) * 16 + 4 * (i >> 1);
  return 4 * i;
}

#if HWY_TARGET == HWY_AVX3_DL
// acc += vpdpbusd(w, the 4 int8 codes at q broadcast to every lane), with the
// broadcast in the instruction's memory operand ({1to16}): GCC 12 emits a
// separate vpbroadcastd per dot instead (prefill MatMul 8-vector tile: see
// docs/model-kernels.md). The asm reads the 4 bytes at q.
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i DpbusdBroadcast(__m512i acc, __m512i w, const int8_t* q) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(q)));
  return acc;
}

// The block's code vectors as unsigned bytes, one row per int32 lane:
// Q4_0 4 loads split into 8 nibble vectors (AND; one GF(2) affine op moves
// each high nibble down), Q8_0 8 loads as they are.
template <class Block>
KVEDGE_ATTR_VNNI512 HWY_INLINE void LoadLaneCodes(const uint8_t* codes, __m512i* out) {
  if constexpr (LaneFormat<Block>::kType == WeightType::kQ4_0) {
    constexpr long long kHighNibble = 0x1020408000000000ll;  // bit i ← bit i + 4
    for (size_t j = 0; j < 4; ++j) {
      const __m512i v = _mm512_load_si512(codes + 64 * j);
      out[2 * j] = _mm512_and_si512(v, _mm512_set1_epi8(15));
      out[2 * j + 1] = _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(kHighNibble), 0);
    }
  } else {
    for (size_t j = 0; j < 8; ++j) out[j] = _mm512_load_si512(codes + 64 * j);
  }
}

// y[v·y_stride + row0 + r] (r < valid_rows) for V vectors over chunk
// blocks [0, nb): group points at the group's bytes, cb is the chunk's first
// block; the sums continue from y when cb > 0 (same order as one pass).
template <class Block, size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void LaneTile(const uint8_t* group, size_t cb, size_t nb, const LaneChunk* const* xc,
                                               float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  constexpr size_t kVecs = kQuantBlock / 4;  // code vectors per block: 4 weights per lane each
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  __m512 sum[V];
  for (size_t v = 0; v < V; ++v) {
    sum[v] = cb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + v * y_stride + row0);
  }
  constexpr WeightType kType = LaneFormat<Block>::kType;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* codes = group + InterleavedCodeOffset(kType, cb + b);
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(group + InterleavedScaleOffset(kType, cb + b));
    __m512i w[kVecs];
    if constexpr (V > 1) {
      // Batched decode spends V× longer per block than MatVec, and then waits
      // on DRAM without a prefetch 4 KiB ahead of the group's stream (the
      // block's 288 bytes: 5 lines): 4.0 → 2.6 ms CPU per 32000x2048 matrix
      // at 8 vectors (MatMul/q4_0.il16/32000x2048/dram/batch:8). MatVec is
      // bandwidth-bound and measured slower with it.
      const char* ahead = reinterpret_cast<const char*>(codes) + 4096;
      for (int l = 0; l < 5; ++l) _mm_prefetch(ahead + 64 * l, _MM_HINT_T0);
    }
    LoadLaneCodes<Block>(codes, w);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
    for (size_t v = 0; v < V; ++v) {
      const int8_t* q = xc[v]->q + b * kQuantBlock;
      __m512i acc = _mm512_set1_epi32(xc[v]->corr[b]);
      for (size_t i = 0; i < kVecs; ++i) {
        acc = DpbusdBroadcast(acc, w[i], q + LaneCodeColumn<Block>(i));
      }
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xc[v]->dx[b]));
      sum[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, sum[v]);
    }
  }
  for (size_t v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + v * y_stride + row0, mask, sum[v]);
}
constexpr bool kInterleavedPreferred = true;
constexpr size_t kLaneTileVecs = 8;
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// AVX2 and AVX-512 without VNNI (Haswell … Alder Lake, Zen 2/3, Skylake-SP):
// the same one-row-per-int32-lane scheme with vpmaddubsw (u8 × s8 pairs →
// int16) and vpmaddwd against ones (→ int32), through raw intrinsics (no
// such op in Highway 1.0.3). 8 rows per 256-bit vector (two halves of a
// group), 16 per 512-bit vector.
//  Q4_0: codes 0…15 × activation codes: a pair sum is ≤ 2·15·127, so the 8
//    vpmaddubsw of a block add up in int16 (≤ 30480) before one vpmaddwd.
//  Q8_0: stored codes − 128 (xor) are signed: |w| × (x with w's sign) keeps
//    every pair ≤ 2·128·127 in int16, each widened by its own vpmaddwd.
// Then the offset sum, one convert and one FMA per block, in block order.
constexpr bool kInterleavedPreferred = true;
#if HWY_TARGET == HWY_AVX2
using LaneI = __m256i;
using LaneF = __m256;
constexpr size_t kLaneRows = 8;
constexpr size_t kLaneTileVecs = 4;  // 16 ymm: 8 codes + 4 sums + temps
HWY_INLINE LaneI LaneLoad(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
HWY_INLINE LaneI LaneSet8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
HWY_INLINE LaneI LaneSet16(int v) { return _mm256_set1_epi16(static_cast<int16_t>(v)); }
HWY_INLINE LaneI LaneSet32(int32_t v) { return _mm256_set1_epi32(v); }
HWY_INLINE LaneI LaneAnd(LaneI a, LaneI b) { return _mm256_and_si256(a, b); }
HWY_INLINE LaneI LaneXor(LaneI a, LaneI b) { return _mm256_xor_si256(a, b); }
HWY_INLINE LaneI LaneShr4(LaneI a) { return _mm256_srli_epi16(a, 4); }
HWY_INLINE LaneI LaneMulPairs(LaneI u8, LaneI s8) { return _mm256_maddubs_epi16(u8, s8); }
HWY_INLINE LaneI LaneAdd16(LaneI a, LaneI b) { return _mm256_add_epi16(a, b); }
HWY_INLINE LaneI LaneAdd32(LaneI a, LaneI b) { return _mm256_add_epi32(a, b); }
HWY_INLINE LaneI LaneWiden(LaneI a) { return _mm256_madd_epi16(a, LaneSet16(1)); }
// (|w|, x·sign(w)) for signed bytes w.
HWY_INLINE void LaneSignSplit(LaneI w, LaneI x, LaneI* abs_w, LaneI* signed_x) {
  *abs_w = _mm256_abs_epi8(w);
  *signed_x = _mm256_sign_epi8(x, w);
}
HWY_INLINE LaneF LaneScales(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}
HWY_INLINE LaneF LaneSetF(float v) { return _mm256_set1_ps(v); }
HWY_INLINE LaneF LaneMulF(LaneF a, LaneF b) { return _mm256_mul_ps(a, b); }
HWY_INLINE LaneF LaneFma(LaneI isum, LaneF s, LaneF acc) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), s, acc); }
HWY_INLINE LaneF LaneLoadF(const float* p, size_t n) {
  HWY_ALIGN float tmp[kLaneRows] = {};
  std::copy(p, p + n, tmp);
  return _mm256_load_ps(tmp);
}
HWY_INLINE void LaneStoreF(LaneF v, float* p, size_t n) {
  HWY_ALIGN float tmp[kLaneRows];
  _mm256_store_ps(tmp, v);
  std::copy(tmp, tmp + n, p);
}
#else
using LaneI = __m512i;
using LaneF = __m512;
constexpr size_t kLaneRows = 16;
constexpr size_t kLaneTileVecs = 8;
HWY_INLINE LaneI LaneLoad(const uint8_t* p) { return _mm512_load_si512(p); }
HWY_INLINE LaneI LaneSet8(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }
HWY_INLINE LaneI LaneSet16(int v) { return _mm512_set1_epi16(static_cast<int16_t>(v)); }
HWY_INLINE LaneI LaneSet32(int32_t v) { return _mm512_set1_epi32(v); }
HWY_INLINE LaneI LaneAnd(LaneI a, LaneI b) { return _mm512_and_si512(a, b); }
HWY_INLINE LaneI LaneXor(LaneI a, LaneI b) { return _mm512_xor_si512(a, b); }
HWY_INLINE LaneI LaneShr4(LaneI a) { return _mm512_srli_epi16(a, 4); }
HWY_INLINE LaneI LaneMulPairs(LaneI u8, LaneI s8) { return _mm512_maddubs_epi16(u8, s8); }
HWY_INLINE LaneI LaneAdd16(LaneI a, LaneI b) { return _mm512_add_epi16(a, b); }
HWY_INLINE LaneI LaneAdd32(LaneI a, LaneI b) { return _mm512_add_epi32(a, b); }
HWY_INLINE LaneI LaneWiden(LaneI a) { return _mm512_madd_epi16(a, LaneSet16(1)); }
// (|w|, x·sign(w)) for signed bytes w (AVX-512 has no vpsignb: negate x
// under w's sign mask; w = 0 contributes 0 through |w| either way).
HWY_INLINE void LaneSignSplit(LaneI w, LaneI x, LaneI* abs_w, LaneI* signed_x) {
  *abs_w = _mm512_abs_epi8(w);
  *signed_x = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
}
HWY_INLINE LaneF LaneScales(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}
HWY_INLINE LaneF LaneSetF(float v) { return _mm512_set1_ps(v); }
HWY_INLINE LaneF LaneMulF(LaneF a, LaneF b) { return _mm512_mul_ps(a, b); }
HWY_INLINE LaneF LaneFma(LaneI isum, LaneF s, LaneF acc) { return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), s, acc); }
HWY_INLINE LaneF LaneLoadF(const float* p, size_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
HWY_INLINE void LaneStoreF(LaneF v, float* p, size_t n) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
}
#endif

// The block's 8 code vectors for rows [8h, 8h + kLaneRows) of a group as
// unsigned (Q4_0) or signed (Q8_0) bytes; vector i pairs with the 4
// activation codes at LaneCodeColumn(i).
template <class Block>
HWY_INLINE void LoadLaneCodes(const uint8_t* codes, size_t h, LaneI* out) {
  if constexpr (LaneFormat<Block>::kType == WeightType::kQ4_0) {
    for (size_t j = 0; j < 4; ++j) {
      const LaneI v = LaneLoad(codes + 64 * j + 4 * kLaneRows * h);
      out[2 * j] = LaneAnd(v, LaneSet8(15));
      out[2 * j + 1] = LaneAnd(LaneShr4(v), LaneSet8(15));
    }
  } else {
    for (size_t j = 0; j < 8; ++j) out[j] = LaneXor(LaneLoad(codes + 64 * j + 4 * kLaneRows * h), LaneSet8(0x80));
  }
}

// Σ of the block's exact products for one input vector, per row lane.
template <class Block>
HWY_INLINE LaneI LaneBlockDot(const LaneI* w, const int8_t* q) {
  if constexpr (LaneFormat<Block>::kType == WeightType::kQ4_0) {
    LaneI pairs = LaneMulPairs(w[0], LaneSet32(LoadU32(q + LaneCodeColumn<Block>(0))));
    for (size_t i = 1; i < 8; ++i) {
      pairs = LaneAdd16(pairs, LaneMulPairs(w[i], LaneSet32(LoadU32(q + LaneCodeColumn<Block>(i)))));
    }
    return LaneWiden(pairs);
  } else {
    LaneI sum = LaneSet32(0);
    for (size_t i = 0; i < 8; ++i) {
      LaneI abs_w, signed_x;
      LaneSignSplit(w[i], LaneSet32(LoadU32(q + LaneCodeColumn<Block>(i))), &abs_w, &signed_x);
      sum = LaneAdd32(sum, LaneWiden(LaneMulPairs(abs_w, signed_x)));
    }
    return sum;
  }
}

// As the VNNI LaneTile: y[v·y_stride + row0 + r], r < valid_rows, over chunk
// blocks [0, nb), continuing from y when cb > 0. Q4_0 codes count from 0
// (offset −8·Σx per block); Q8_0 codes are already signed (no offset).
// AVX2 holds a group in two halves: MatVec (V = 1) takes both per block, so
// the group streams once (half by half it ran at ~half the DRAM speed);
// MatMul tiles take one half per pass, so V sums and 8 codes fit 16 ymm.
template <class Block, size_t V>
HWY_NOINLINE void LaneTile(const uint8_t* group, size_t cb, size_t nb, const LaneChunk* const* xc, float* y,
                           size_t y_stride, size_t row0, size_t valid_rows) {
  constexpr WeightType kType = LaneFormat<Block>::kType;
  constexpr size_t kHalves = kInterleaveRows / kLaneRows;
  constexpr size_t kPerPass = V == 1 ? kHalves : 1;  // halves per pass
  for (size_t h0 = 0; h0 * kLaneRows < valid_rows; h0 += kPerPass) {
    size_t rows[kPerPass];  // valid rows of each half in this pass (0: none)
    LaneF sum[kPerPass][V];
    for (size_t i = 0; i < kPerPass; ++i) {
      const size_t first = (h0 + i) * kLaneRows;
      rows[i] = first < valid_rows ? std::min(kLaneRows, valid_rows - first) : 0;
      for (size_t v = 0; v < V; ++v) {
        sum[i][v] = cb == 0 || rows[i] == 0 ? LaneSetF(0.0f) : LaneLoadF(y + v * y_stride + row0 + first, rows[i]);
      }
    }
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* codes = group + InterleavedCodeOffset(kType, cb + b);
      const uint8_t* scales = group + InterleavedScaleOffset(kType, cb + b);
      for (size_t i = 0; i < kPerPass; ++i) {
        LaneI w[8];
        LoadLaneCodes<Block>(codes, h0 + i, w);
        const LaneF dw = LaneScales(scales + 2 * kLaneRows * (h0 + i));
        for (size_t v = 0; v < V; ++v) {
          LaneI isum = LaneBlockDot<Block>(w, xc[v]->q + b * kQuantBlock);
          if constexpr (kType == WeightType::kQ4_0) isum = LaneAdd32(isum, LaneSet32(xc[v]->corr[b]));
          sum[i][v] = LaneFma(isum, LaneMulF(dw, LaneSetF(xc[v]->dx[b])), sum[i][v]);
        }
      }
    }
    for (size_t i = 0; i < kPerPass; ++i) {
      if (rows[i] == 0) continue;
      for (size_t v = 0; v < V; ++v) LaneStoreF(sum[i][v], y + v * y_stride + row0 + (h0 + i) * kLaneRows, rows[i]);
    }
  }
}
#else
// Portable form: int16 multiply-adds per sub-vector of rows (the int16 path's
// arithmetic); exact integer dots, the same f32 sequence per (row, vector).
constexpr bool kInterleavedPreferred = false;
constexpr size_t kLaneTileVecs = 8;

// isum[r] = corr + Σ_i Σ_{t<4} code(r, i, t)·q[col(i) + t] for the n32 rows
// at sub (exact int32), codes: the block's code bytes.
#if HWY_TARGET == HWY_SCALAR
template <class Block>
HWY_INLINE void LaneBlockDots(const uint8_t* codes, size_t sub, const int8_t* q, int32_t corr, int32_t* isum) {
  constexpr size_t kVecs = kQuantBlock / 4;  // 4 weights per lane each
  int32_t s = corr;
  for (size_t i = 0; i < kVecs; ++i) {
    const size_t vec = LaneFormat<Block>::kType == WeightType::kQ4_0 ? i >> 1 : i;
    const size_t col = LaneCodeColumn<Block>(i);
    for (size_t t = 0; t < 4; ++t) {
      uint8_t c = codes[64 * vec + 4 * sub + t];
      if constexpr (LaneFormat<Block>::kType == WeightType::kQ4_0) c = (i & 1) ? c >> 4 : c & 15;
      s += static_cast<int32_t>(c) * q[col + t];
    }
  }
  *isum = s;
}
#else
template <class Block>
HWY_INLINE void LaneBlockDots(const uint8_t* codes, size_t sub, const int8_t* q, int32_t corr, int32_t* isum) {
  constexpr size_t kVecs = kQuantBlock / 4;  // 4 weights per lane each
  const hn::CappedTag<int32_t, kInterleaveRows> di32;
  const hn::Repartition<int16_t, decltype(di32)> di16;
  const hn::Repartition<uint16_t, decltype(di32)> du16;
  const hn::Repartition<uint8_t, decltype(di32)> du8;
  // RearrangeToOddPlusEven pairs lanes on some targets (NEON), so the offset
  // sum is added after it, not preloaded.
  auto s0 = hn::Zero(di32), s1 = hn::Zero(di32);
  for (size_t i = 0; i < kVecs; ++i) {
    const size_t vec = LaneFormat<Block>::kType == WeightType::kQ4_0 ? i >> 1 : i;
    auto bytes = hn::LoadU(du8, codes + 64 * vec + 4 * sub);
    if constexpr (LaneFormat<Block>::kType == WeightType::kQ4_0) {
      bytes = (i & 1) ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(du8, 15));
    }
    // Bytes (b0, b1, b2, b3) of a lane as int16 pairs (b0, b2) and (b1, b3),
    // against codes (q0, q2) and (q1, q3).
    const auto words = hn::BitCast(du16, bytes);
    const auto even = hn::BitCast(di16, hn::And(words, hn::Set(du16, 0xFF)));
    const auto odd = hn::BitCast(di16, hn::ShiftRight<8>(words));
    const int8_t* qc = q + LaneCodeColumn<Block>(i);
    const auto q02 = hn::BitCast(di16, hn::Set(di32, static_cast<int32_t>(static_cast<uint16_t>(qc[0]) |
                                                                         (static_cast<uint32_t>(qc[2]) << 16))));
    const auto q13 = hn::BitCast(di16, hn::Set(di32, static_cast<int32_t>(static_cast<uint16_t>(qc[1]) |
                                                                         (static_cast<uint32_t>(qc[3]) << 16))));
    s0 = hn::ReorderWidenMulAccumulate(di32, even, q02, s0, s1);
    s0 = hn::ReorderWidenMulAccumulate(di32, odd, q13, s0, s1);
  }
  hn::StoreU(hn::Add(hn::RearrangeToOddPlusEven(s0, s1), hn::Set(di32, corr)), di32, isum);
}
#endif  // HWY_TARGET == HWY_SCALAR

template <class Block, size_t V>
HWY_NOINLINE void LaneTile(const uint8_t* group, size_t cb, size_t nb, const LaneChunk* const* xc, float* y,
                           size_t y_stride, size_t row0, size_t valid_rows) {
  const hn::CappedTag<float, kInterleaveRows> df;
  const size_t n = hn::Lanes(df);
  HWY_ALIGN float sum[V][kInterleaveRows];  // [vector][row] running sums
  for (size_t v = 0; v < V; ++v) {
    for (size_t r = 0; r < kInterleaveRows; ++r) sum[v][r] = cb == 0 || r >= valid_rows ? 0.0f : y[v * y_stride + row0 + r];
  }
  constexpr WeightType kType = LaneFormat<Block>::kType;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* codes = group + InterleavedCodeOffset(kType, cb + b);
    HWY_ALIGN float dw[kInterleaveRows];
    HalvesToFloats(reinterpret_cast<const uint16_t*>(group + InterleavedScaleOffset(kType, cb + b)), dw);
    for (size_t v = 0; v < V; ++v) {
      const int8_t* q = xc[v]->q + b * kQuantBlock;
      for (size_t sub = 0; sub < kInterleaveRows; sub += n) {
        HWY_ALIGN int32_t isum[kInterleaveRows];
        LaneBlockDots<Block>(codes, sub, q, xc[v]->corr[b], isum);
        const hn::Rebind<int32_t, decltype(df)> di32;
        const auto s = hn::Mul(hn::Load(df, dw + sub), hn::Set(df, xc[v]->dx[b]));
        hn::Store(hn::MulAdd(hn::ConvertTo(df, hn::Load(di32, isum)), s, hn::Load(df, sum[v] + sub)), df,
                  sum[v] + sub);
      }
    }
  }
  for (size_t v = 0; v < V; ++v) {
    for (size_t r = 0; r < valid_rows; ++r) y[v * y_stride + row0 + r] = sum[v][r];
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

// Rows [row_begin, row_end) (row_begin a multiple of 16) × n input vectors.
// Y[v][rows]; n == 1 is MatVec. Input tiles of kMatMulTile vectors are
// quantized per column chunk; each group's codes stream once per tile.
template <class Block>
void LaneMatMulRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  const size_t nb_row = m.cols / kQuantBlock;
  const size_t group_bytes = InterleavedGroupBytes(m.type, m.cols);
  const uint8_t* base = static_cast<const uint8_t*>(m.data);
  HWY_ALIGN LaneChunk xc[kMatMulTile];  // [tile vector] chunk activations
  for (size_t v0 = 0; v0 < n; v0 += kMatMulTile) {
    const size_t nv = std::min(kMatMulTile, n - v0);
    for (size_t cb = 0; cb < nb_row; cb += kChunkBlocks) {
      const size_t nb = std::min(kChunkBlocks, nb_row - cb);
      for (size_t v = 0; v < nv; ++v) PrepareLaneChunk<Block>(x + (v0 + v) * m.cols + cb * kQuantBlock, nb, xc + v);
      for (size_t r = row_begin; r < row_end; r += kInterleaveRows) {
        const uint8_t* group = base + (r / kInterleaveRows) * group_bytes;
        const size_t valid = std::min(kInterleaveRows, row_end - r);
        float* yv = y + v0 * m.rows;
        for (size_t v = 0; v < nv;) {
          const LaneChunk* xv[kMatMulTile];
          for (size_t j = 0; j < nv - v; ++j) xv[j] = xc + v + j;
          if (kLaneTileVecs == 8 && nv - v >= 8) {
            LaneTile<Block, kLaneTileVecs>(group, cb, nb, xv, yv + v * m.rows, m.rows, r, valid);
            v += 8;
          } else if (nv - v >= 4) {
            LaneTile<Block, 4>(group, cb, nb, xv, yv + v * m.rows, m.rows, r, valid);
            v += 4;
          } else {
            LaneTile<Block, 1>(group, cb, nb, xv, yv + v * m.rows, m.rows, r, valid);
            v += 1;
          }
        }
      }
    }
  }
}

// ------------------------------ per-target entry points

// Interleaved Q8_0/Q4_0: one kernel for MatVec (n = 1) and MatMul.
void LaneRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  if (m.type == WeightType::kQ8_0) return LaneMatMulRows<BlockQ8_0>(m, x, n, y, row_begin, row_end);
  return LaneMatMulRows<BlockQ4_0>(m, x, n, y, row_begin, row_end);
}

void MatVecRowsT(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  if (m.layout == WeightLayout::kInterleaved16) return LaneRows(m, x, 1, y, row_begin, row_end);
  switch (m.type) {
    case WeightType::kF32: return FloatMatVecRows<float>(m, x, y, row_begin, row_end);
    case WeightType::kF16: return FloatMatVecRows<hwy::float16_t>(m, x, y, row_begin, row_end);
    case WeightType::kBF16: return FloatMatVecRows<hwy::bfloat16_t>(m, x, y, row_begin, row_end);
    case WeightType::kQ8_0: return QuantMatVecRows<BlockQ8_0>(m, x, y, row_begin, row_end);
    case WeightType::kQ4_0: return QuantMatVecRows<BlockQ4_0>(m, x, y, row_begin, row_end);
    case WeightType::kQ4_1: return QuantMatVecRows<BlockQ4_1>(m, x, y, row_begin, row_end);
    case WeightType::kQ5_0: return QuantMatVecRows<BlockQ5_0>(m, x, y, row_begin, row_end);
    case WeightType::kQ5_1: return QuantMatVecRows<BlockQ5_1>(m, x, y, row_begin, row_end);
    case WeightType::kIQ4_NL: return QuantMatVecRows<BlockIQ4_NL>(m, x, y, row_begin, row_end);
    default: HWY_ABORT("%s: block-tile and K-quant types run in matvec_blocks.cc / matvec_kquant.cc",
                       WeightTypeName(m.type));
  }
}

void MatMulRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  if (m.layout == WeightLayout::kInterleaved16) return LaneRows(m, x, n, y, row_begin, row_end);
  switch (m.type) {
    case WeightType::kF32: return FloatMatMulRows<float>(m, x, n, y, row_begin, row_end);
    case WeightType::kF16: return FloatMatMulRows<hwy::float16_t>(m, x, n, y, row_begin, row_end);
    case WeightType::kBF16: return FloatMatMulRows<hwy::bfloat16_t>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ8_0: return QuantMatMulRows<BlockQ8_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_0: return QuantMatMulRows<BlockQ4_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_1: return QuantMatMulRows<BlockQ4_1>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_0: return QuantMatMulRows<BlockQ5_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_1: return QuantMatMulRows<BlockQ5_1>(m, x, n, y, row_begin, row_end);
    case WeightType::kIQ4_NL: return QuantMatMulRows<BlockIQ4_NL>(m, x, n, y, row_begin, row_end);
    default: HWY_ABORT("%s: block-tile and K-quant types run in matvec_blocks.cc / matvec_kquant.cc",
                       WeightTypeName(m.type));
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

// Applies op(df, vectors...) over n elements of `out` and one or two inputs;
// the tail goes through one padded vector so it gets the same math.
template <class Op>
HWY_INLINE void Elementwise2(const float* a, const float* b, size_t n, float* out, Op op) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(op(df, hn::LoadU(df, a + i), hn::LoadU(df, b + i)), df, out + i);
  if (i == n) return;
  HWY_ALIGN float ta[HWY_MAX_BYTES / sizeof(float)] = {};
  HWY_ALIGN float tb[HWY_MAX_BYTES / sizeof(float)] = {};
  std::copy(a + i, a + n, ta);
  std::copy(b + i, b + n, tb);
  hn::Store(op(df, hn::Load(df, ta), hn::Load(df, tb)), df, ta);
  std::copy(ta, ta + (n - i), out + i);
}

// gelu_tanh(g)·u = 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³)))·u with
// Highway's Tanh (≤ 4 ulp; saturates to ±1 past |x| ≈ 18.7).
void GeluTanhMulT(const float* gate, const float* up, size_t n, float* out) {
  Elementwise2(gate, up, n, out, [](auto df, auto g, auto u) HWY_ATTR {
    const auto inner = hn::Mul(hn::Set(df, 0.7978845608f), hn::MulAdd(hn::Mul(hn::Set(df, 0.044715f), g),
                                                                      hn::Mul(g, g), g));
    const auto t = hn::Tanh(df, inner);
    return hn::Mul(hn::Mul(hn::Mul(hn::Set(df, 0.5f), g), hn::Add(hn::Set(df, 1.0f), t)), u);
  });
}

// cap·tanh(x/cap).
void SoftCapT(const float* x, size_t n, float cap, float* out) {
  const float inv = 1.0f / cap;
  Elementwise2(x, x, n, out, [cap, inv](auto df, auto v, auto) HWY_ATTR {
    return hn::Mul(hn::Set(df, cap), hn::Tanh(df, hn::Mul(v, hn::Set(df, inv))));
  });
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

bool InterleavedPreferredT() { return kInterleavedPreferred; }

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
HWY_EXPORT(GeluTanhMulT);
HWY_EXPORT(SoftCapT);
HWY_EXPORT(AddInPlaceT);
HWY_EXPORT(DotF32T);
HWY_EXPORT(InterleavedPreferredT);

namespace {

// Block formats need whole blocks, and only Q8_0/Q4_0 interleave; anything
// else is a caller bug.
void CheckShape(const MatrixView& w) {
  if (w.cols % WeightBlockSize(w.type) != 0) {
    std::fprintf(stderr, "%s:%d: %s matrix has %zu columns, expected a multiple of %u\n", __FILE__, __LINE__,
                 WeightTypeName(w.type), w.cols, WeightBlockSize(w.type));
    std::abort();
  }
  if (w.layout == WeightLayout::kInterleaved16 && !IsInterleavable(w.type)) {
    std::fprintf(stderr, "%s:%d: %s matrix cannot be interleaved\n", __FILE__, __LINE__, WeightTypeName(w.type));
    std::abort();
  }
}

// Interleaved matrices split into whole 16-row groups.
void CheckRowRange(const MatrixView& w, size_t row_begin, size_t row_end) {
  if (w.layout == WeightLayout::kInterleaved16 &&
      (row_begin % kInterleaveRows != 0 || (row_end % kInterleaveRows != 0 && row_end != w.rows))) {
    std::fprintf(stderr, "%s:%d: rows [%zu, %zu) of an interleaved matrix do not start and end on 16-row groups\n",
                 __FILE__, __LINE__, row_begin, row_end);
    std::abort();
  }
}

// Calls fn(row_begin, row_end) over the arena's threads: ranges of rows, of
// whole 16-row groups for interleaved matrices.
template <class F>
void ForRowRanges(const MatrixView& w, ThreadArena* arena, const F& fn) {
  if (arena == nullptr || arena->num_threads() == 1) return fn(0, w.rows);
  if (w.layout == WeightLayout::kRows) {
    return arena->ParallelFor(w.rows, [&](size_t begin, size_t end, int /*thread*/) { fn(begin, end); });
  }
  arena->ParallelFor(InterleavedGroups(w.rows), [&](size_t begin, size_t end, int /*thread*/) {
    fn(begin * kInterleaveRows, std::min(end * kInterleaveRows, w.rows));
  });
}

}  // namespace

size_t InterleavedGroupBytes(WeightType t, size_t cols) {
  const size_t nb = cols / kQuantBlock;
  const size_t c = InterleavedCodeBytes(t);
  return nb / 2 * (2 * c + 64) + nb % 2 * (c + 64);
}

size_t MatrixBytes(WeightType t, WeightLayout layout, size_t rows, size_t cols) {
  if (layout == WeightLayout::kRows) return rows * WeightRowBytes(t, cols);
  return InterleavedGroups(rows) * InterleavedGroupBytes(t, cols);
}

bool InterleavedWeightsPreferred() { return HWY_DYNAMIC_DISPATCH(InterleavedPreferredT)(); }

// One dispatch per contiguous row range, to the kernel family of w's type
// (WeightKernel in weight_format.h).
void MatVecRange(const MatrixView& w, const float* x, float* y, size_t begin, size_t end) {
  const WeightKernel kernel = GetWeightFormat(w.type).kernel;
  if (kernel == WeightKernel::kBlockTile) return BlockTileRows(w, x, 1, y, begin, end);
  if (kernel == WeightKernel::kInt8K) return KQuantRows(w, x, 1, y, begin, end);
  HWY_DYNAMIC_DISPATCH(MatVecRowsT)(w, x, y, begin, end);
}

void MatVecRows(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  CheckShape(w);
  if (row_begin >= row_end) return;
  CheckRowRange(w, row_begin, row_end);
  MatVecRange(w, x, y, row_begin, row_end);
}

void MatVec(const MatrixView& w, const float* x, float* y, ThreadArena* arena) {
  CheckShape(w);
  // Each thread quantizes x itself (int8 path: O(cols), small next to its
  // rows·cols weight stream).
  ForRowRanges(w, arena, [&](size_t begin, size_t end) { MatVecRange(w, x, y, begin, end); });
}

void MatMul(const MatrixView& w, const float* x, size_t n, float* y, ThreadArena* arena) {
  CheckShape(w);
  if (n == 0) return;
  ForRowRanges(w, arena, [&](size_t begin, size_t end) {
    const WeightKernel kernel = GetWeightFormat(w.type).kernel;
    if (kernel == WeightKernel::kBlockTile) return BlockTileRows(w, x, n, y, begin, end);
    if (kernel == WeightKernel::kInt8K) return KQuantBatchRows(w, x, n, y, begin, end);
    HWY_DYNAMIC_DISPATCH(MatMulRowsT)(w, x, n, y, begin, end);
  });
}

void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormT)(x, weight, n, eps, out);
}

void SwiGlu(const float* gate, const float* up, size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SwiGluT)(gate, up, n, out);
}

void GeluTanhMul(const float* gate, const float* up, size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(GeluTanhMulT)(gate, up, n, out);
}

void SoftCap(const float* x, size_t n, float cap, float* out) { HWY_DYNAMIC_DISPATCH(SoftCapT)(x, n, cap, out); }

void AddInPlace(float* acc, const float* x, size_t n) { HWY_DYNAMIC_DISPATCH(AddInPlaceT)(acc, x, n); }

float DotF32(const float* a, const float* b, size_t n) { return HWY_DYNAMIC_DISPATCH(DotF32T)(a, b, n); }

}  // namespace kvedge
#endif  // HWY_ONCE
