// Matrix products over the block formats of WeightKernel::kBlockTile, per
// Highway target. Weights are never dequantized as a matrix: each row is
// decoded 256 weights at a time (8 legacy blocks) into a 1 KiB stack tile by
// the vector decoders (decode_legacy-inl.h), which then meets the f32
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

// Batched decode and prefill: acc[v·N, v·N + N) += Σ tile[i]·x[v·stride + i]
// over i < len, for v < kV (≤ 8), with the kV accumulators in registers and
// each tile vector loaded once for all of them. Every vector's accumulator
// takes TileDot's FMAs in TileDot's order, so the sums equal kV separate
// TileDot calls bit for bit; the gain is kV independent FMA chains (TileDot
// alone waits on one: the FMA latency bounds it) and one tile load per kV
// FMAs. acc: [kV][N] f32, aligned; x: [kV][stride] f32.
template <size_t kV, class DF>
HWY_INLINE void TileDots(DF df, const float* HWY_RESTRICT tile, const float* HWY_RESTRICT x, size_t stride,
                         size_t len, float* HWY_RESTRICT acc) {
  static_assert(kV >= 1 && kV <= 8, "up to 8 accumulators");
  const size_t N = hn::Lanes(df);
  auto a0 = hn::Load(df, acc);
  auto a1 = kV > 1 ? hn::Load(df, acc + 1 * N) : hn::Zero(df);
  auto a2 = kV > 2 ? hn::Load(df, acc + 2 * N) : hn::Zero(df);
  auto a3 = kV > 3 ? hn::Load(df, acc + 3 * N) : hn::Zero(df);
  auto a4 = kV > 4 ? hn::Load(df, acc + 4 * N) : hn::Zero(df);
  auto a5 = kV > 5 ? hn::Load(df, acc + 5 * N) : hn::Zero(df);
  auto a6 = kV > 6 ? hn::Load(df, acc + 6 * N) : hn::Zero(df);
  auto a7 = kV > 7 ? hn::Load(df, acc + 7 * N) : hn::Zero(df);
  size_t i = 0;
  for (; i + N <= len; i += N) {
    const auto t = hn::Load(df, tile + i);
    a0 = hn::MulAdd(t, hn::LoadU(df, x + i), a0);
    if constexpr (kV > 1) a1 = hn::MulAdd(t, hn::LoadU(df, x + 1 * stride + i), a1);
    if constexpr (kV > 2) a2 = hn::MulAdd(t, hn::LoadU(df, x + 2 * stride + i), a2);
    if constexpr (kV > 3) a3 = hn::MulAdd(t, hn::LoadU(df, x + 3 * stride + i), a3);
    if constexpr (kV > 4) a4 = hn::MulAdd(t, hn::LoadU(df, x + 4 * stride + i), a4);
    if constexpr (kV > 5) a5 = hn::MulAdd(t, hn::LoadU(df, x + 5 * stride + i), a5);
    if constexpr (kV > 6) a6 = hn::MulAdd(t, hn::LoadU(df, x + 6 * stride + i), a6);
    if constexpr (kV > 7) a7 = hn::MulAdd(t, hn::LoadU(df, x + 7 * stride + i), a7);
  }
  hn::Store(a0, df, acc);
  if constexpr (kV > 1) hn::Store(a1, df, acc + 1 * N);
  if constexpr (kV > 2) hn::Store(a2, df, acc + 2 * N);
  if constexpr (kV > 3) hn::Store(a3, df, acc + 3 * N);
  if constexpr (kV > 4) hn::Store(a4, df, acc + 4 * N);
  if constexpr (kV > 5) hn::Store(a5, df, acc + 5 * N);
  if constexpr (kV > 6) hn::Store(a6, df, acc + 6 * N);
  if constexpr (kV > 7) hn::Store(a7, df, acc + 7 * N);
  if (i < len) {  // vectors wider than 32 lanes: TileDot's zero-padded tail
    for (size_t v = 0; v < kV; ++v) {
      HWY_ALIGN float xt[kMaxLanes] = {};
      std::copy(x + v * stride + i, x + v * stride + len, xt);
      hn::Store(hn::MulAdd(hn::Load(df, tile + i), hn::Load(df, xt), hn::Load(df, acc + v * N)), df, acc + v * N);
    }
  }
}

// TileDots for a run-time nv in [1, 8].
template <class DF>
HWY_INLINE void TileDotsN(DF df, const float* HWY_RESTRICT tile, const float* HWY_RESTRICT x, size_t stride,
                          size_t len, size_t nv, float* HWY_RESTRICT acc) {
  switch (nv) {
    case 1: return TileDots<1>(df, tile, x, stride, len, acc);
    case 2: return TileDots<2>(df, tile, x, stride, len, acc);
    case 3: return TileDots<3>(df, tile, x, stride, len, acc);
    case 4: return TileDots<4>(df, tile, x, stride, len, acc);
    case 5: return TileDots<5>(df, tile, x, stride, len, acc);
    case 6: return TileDots<6>(df, tile, x, stride, len, acc);
    case 7: return TileDots<7>(df, tile, x, stride, len, acc);
    default: return TileDots<8>(df, tile, x, stride, len, acc);
  }
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
        if (nv == 1) {
          hn::Store(TileDot(df, tile, x + v0 * m.cols + c, len, hn::Load(df, acc)), df, acc);
        } else {
          TileDotsN(df, tile, x + v0 * m.cols + c, m.cols, len, nv, acc);
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
