// Matrix products over the block formats of WeightKernel::kBlockTile, per
// Highway target. Weights are never dequantized as a matrix: each row is
// decoded 256 weights at a time (one K-quant super-block, or 8 legacy blocks)
// into a 1 KiB stack tile by the per-family vector decoders
// (decode_kquant-inl.h, decode_legacy-inl.h), which then meets the f32
// activations in vector FMAs. The decoded values are ggml's exactly
// (weight_format.h), so the only error against exact arithmetic is the f32
// accumulation. Decode costs once per row and per pass of up to kVecTile
// input vectors (MatMul), so prefill amortizes it.
//
// Every (row, input vector) pair runs the same op sequence in any call shape,
// so MatVec with any thread count and MatMul agree bit for bit.
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "simd/half_inline.h"
#include "simd/matvec_blocks.h"
#include "simd/weight_format.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_blocks.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "simd/decode_kquant-inl.h"
#include "simd/decode_legacy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kTileCols = 256;                         // decoded weights per tile
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
constexpr size_t kVecTile = 8;                            // input vectors per decode

// acc += Σ tile[i]·xv[i] over i < len, lane-wise. tile: [len rounded up to
// a vector] f32, aligned, zero past len; xv: [len] f32. len a multiple of 32,
// so only vectors wider than 32 lanes (SVE beyond 1024 bits) see a tail,
// read through a zero-padded copy (no read past xv).
template <class DF>
HWY_INLINE hn::Vec<DF> TileDot(DF df, const float* HWY_RESTRICT tile, const float* HWY_RESTRICT xv, size_t len,
                               hn::Vec<DF> acc) {
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= len; i += N) acc = hn::MulAdd(hn::Load(df, tile + i), hn::LoadU(df, xv + i), acc);
  if (i < len) {
    HWY_ALIGN float xt[kMaxLanes] = {};
    std::copy(xv + i, xv + len, xt);
    acc = hn::MulAdd(hn::Load(df, tile + i), hn::Load(df, xt), acc);
  }
  return acc;
}

// out[0, len) = the len weights at src (len ≤ 256, a multiple of the block).
// The vector decoders give the table's values bit for bit; vectors wider
// than 16 f32 lanes (a K-quant sub-block) use the table itself.
template <class DF>
HWY_INLINE void DecodeTile(DF df, const WeightFormat& f, const uint8_t* src, size_t len, float* out) {
  if (hn::Lanes(df) > 16) return f.dequantize(src, out, len);
  const size_t nb = len / f.block;
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* b = src + i * f.block_bytes;
    float* y = out + i * f.block;
    switch (f.type) {
      case WeightType::kQ4_1: DecodeQ4_1(df, *reinterpret_cast<const BlockQ4_1*>(b), y); break;
      case WeightType::kQ5_0: {
        const auto& q = *reinterpret_cast<const BlockQ5_0*>(b);
        DecodeQ5<false>(df, q, 0.0f, y);
        break;
      }
      case WeightType::kQ5_1: {
        const auto& q = *reinterpret_cast<const BlockQ5_1*>(b);
        DecodeQ5<true>(df, q, HalfToFloat(q.m), y);
        break;
      }
      case WeightType::kIQ4_NL: {
        const auto& q = *reinterpret_cast<const BlockIQ4_NL*>(b);
        DecodeIq4Codes(df, q.qs, HalfToFloat(q.d), y);
        break;
      }
      case WeightType::kIQ4_XS: DecodeIQ4_XS(df, *reinterpret_cast<const BlockIQ4_XS*>(b), y); break;
      case WeightType::kQ2_K: DecodeQ2_K(df, *reinterpret_cast<const BlockQ2_K*>(b), y); break;
      case WeightType::kQ3_K: DecodeQ3_K(df, *reinterpret_cast<const BlockQ3_K*>(b), y); break;
      default: return f.dequantize(src, out, len);
    }
  }
}

// For tests: the vector decoders against the table.
void DecodeTileT(WeightType t, const void* src, size_t len, float* out) {
  DecodeTile(hn::ScalableTag<float>(), GetWeightFormat(t), static_cast<const uint8_t*>(src), len, out);
}

void BlockTileRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const WeightFormat& f = GetWeightFormat(m.type);
  const size_t row_bytes = WeightRowBytes(m.type, m.cols);
  HWY_ALIGN float tile[kTileCols + kMaxLanes] = {};  // [256] decoded weights + zero pad
  HWY_ALIGN float acc[kVecTile * kMaxLanes];         // [vector][lane] running sums
  const auto* base = static_cast<const uint8_t*>(m.data);
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = base + r * row_bytes;
    for (size_t v0 = 0; v0 < n; v0 += kVecTile) {
      const size_t nv = std::min(kVecTile, n - v0);
      for (size_t v = 0; v < nv; ++v) hn::Store(hn::Zero(df), df, acc + v * N);
      for (size_t c = 0; c < m.cols; c += kTileCols) {
        const size_t len = std::min(kTileCols, m.cols - c);
        DecodeTile(df, f, row + c / f.block * f.block_bytes, len, tile);
        if (len < kTileCols) std::fill(tile + len, tile + kTileCols, 0.0f);
        for (size_t v = 0; v < nv; ++v) {
          const float* xv = x + (v0 + v) * m.cols + c;
          hn::Store(TileDot(df, tile, xv, len, hn::Load(df, acc + v * N)), df, acc + v * N);
        }
      }
      for (size_t v = 0; v < nv; ++v) {
        y[(v0 + v) * m.rows + r] = hn::GetLane(hn::SumOfLanes(df, hn::Load(df, acc + v * N)));
      }
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(BlockTileRowsT);
HWY_EXPORT(DecodeTileT);

void DecodeBlockTile(WeightType t, const void* src, size_t len, float* out) {
  HWY_DYNAMIC_DISPATCH(DecodeTileT)(t, src, len, out);
}

void BlockTileRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(BlockTileRowsT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
