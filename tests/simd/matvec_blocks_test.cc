// The block-tile kernels (Q4_1, Q5_0, Q5_1, K-quants, IQ4: matvec_blocks.cc)
// against the scalar reference, once per compiled Highway target (the
// fixture restricts dispatch to that target). Matrices are random bytes with
// finite f16 scale fields: every bit pattern of codes and packed scales is a
// valid block.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "platform/thread_arena.h"
#include "simd/float16.h"
#include "simd/matvec_blocks.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "tests/testing/random_weights.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matvec_blocks_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATVEC_BLOCKS_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATVEC_BLOCKS_TEST_HELPERS_
namespace kvedge {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;

std::vector<WeightType> BlockTileTypes() {
  std::vector<WeightType> out;
  for (int i = 0; i < kNumWeightTypes; ++i) {
    const auto t = static_cast<WeightType>(i);
    if (GetWeightFormat(t).kernel == WeightKernel::kBlockTile) out.push_back(t);
  }
  return out;
}


std::vector<float> RandomVector(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

std::vector<size_t> ColsFor(WeightType t) {
  if (WeightBlockSize(t) == 256) return {256, 3 * 256, 4096 + 256};
  return {32, 96, 288, 1024 + 32};
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MATVEC_BLOCKS_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The vector decoders equal the table's scalar dequantizers (ggml's values)
// bit for bit, on random blocks whose f16 fields are any finite half
// (subnormals and zeros included).
void TestVectorDecodeIsBitExact() {
  std::mt19937 rng(31);
  for (WeightType t : BlockTileTypes()) {
    const WeightFormat& f = GetWeightFormat(t);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<uint8_t> bytes(WeightRowBytes(t, 256));
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      for (size_t off = 0; off < bytes.size(); off += f.block_bytes) {
        for (size_t field : HalfFields(t)) {
          uint16_t h = static_cast<uint16_t>(rng());
          if ((h & 0x7C00) == 0x7C00) h &= 0xBFFF;  // no inf/nan
          std::memcpy(&bytes[off + field], &h, 2);
        }
      }
      for (size_t len : {size_t{256}, size_t{f.block}}) {
        float want[256], got[256];
        DequantizeRow(t, bytes.data(), want, len);
        DecodeBlockTile(t, bytes.data(), len, got);
        ASSERT_EQ(std::memcmp(want, got, len * sizeof(float)), 0) << WeightTypeName(t) << " trial " << trial;
      }
    }
  }
}

// The kernel decodes exactly ref's weights; its only error is f32
// accumulation: |y − ref| ≤ γ·Σ|w·x|, γ = (cols/N + N + 8)·u.
void TestBlockMatVecVsReference() {
  std::mt19937 rng(23);
  const size_t lanes = hn::Lanes(hn::ScalableTag<float>());
  for (WeightType t : BlockTileTypes()) {
    for (size_t cols : ColsFor(t)) {
      for (size_t rows : {1u, 3u, 17u, 64u}) {
        const TestMatrix m = RandomMatrix(t, rows, cols, rng);
        const std::vector<float> x = RandomVector(cols, rng);
        std::vector<float> y(rows), want(rows), w(cols);
        MatVec(m.view, x.data(), y.data(), nullptr);
        ref::MatVecRows(m.view, x.data(), want.data(), 0, rows);
        const double gamma = static_cast<double>(cols / lanes + lanes + 8) * kUnitRoundoff;
        for (size_t r = 0; r < rows; ++r) {
          ref::DequantizeRow(m.view, r, w.data());
          double abs_dot = 0;
          for (size_t c = 0; c < cols; ++c) abs_dot += std::fabs(static_cast<double>(w[c]) * x[c]);
          ASSERT_LE(std::fabs(y[r] - want[r]), gamma * abs_dot + 1e-30)
              << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r;
        }
      }
    }
  }
}

// MatMul (tiles of 8 vectors, every tail width 1 … 7) and multi-threaded MatVec
// equal single-threaded MatVec bit for bit.
void TestBlockMatMulAndThreads() {
  std::mt19937 rng(29);
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(3).value();
  for (WeightType t : BlockTileTypes()) {
    const size_t cols = WeightBlockSize(t) == 256 ? 512 : 96;
    const size_t rows = 37;
    const TestMatrix m = RandomMatrix(t, rows, cols, rng);
    for (size_t n : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 17u}) {
      const std::vector<float> x = RandomVector(n * cols, rng);  // [n][cols]
      ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(m.view, x, n, arena.get()));
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_BEFORE_TEST(BlockKernelsTest);
HWY_EXPORT_AND_TEST_P(BlockKernelsTest, TestVectorDecodeIsBitExact);
HWY_EXPORT_AND_TEST_P(BlockKernelsTest, TestBlockMatVecVsReference);
HWY_EXPORT_AND_TEST_P(BlockKernelsTest, TestBlockMatMulAndThreads);

}  // namespace kvedge
#endif  // HWY_ONCE
