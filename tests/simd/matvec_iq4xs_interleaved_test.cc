// IQ4_XS in the interleaved layout (kInterleaved16, matvec_iq4xs_interleaved.cc):
// the layout round trip, and per compiled Highway target (the fixture
// restricts dispatch to that target) MatVec against llama.cpp's integer dot
// product (ref::MatVecRowsQ8K on the GGUF rows, bit for bit), MatMul and
// threads against MatVec, on both layouts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"
#include "tests/testing/random_weights.h"
#include "tests/testing/test_scale.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matvec_iq4xs_interleaved_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATVEC_IQ4XS_INTERLEAVED_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATVEC_IQ4XS_INTERLEAVED_TEST_HELPERS_
namespace kvedge {
namespace {

// Lossless: every super-block reads back to its GGUF bytes, every weight
// dequantizes the same, padded rows are zero weights; a group is the 16
// rows' GGUF bytes, in 64-byte lines.
TEST(IQ4XSInterleavedLayoutTest, RoundTrip) {
  std::mt19937 rng(71);
  const WeightType t = WeightType::kIQ4_XS;
  EXPECT_TRUE(IsInterleavable(t));
  for (size_t rows : {1u, 16u, 17u, 40u}) {
    for (size_t cols : {256u, 768u, 4096u + 256u}) {
      const TestMatrix m = RandomMatrix(t, rows, cols, rng);
      const TestMatrix il = InterleavedCopy(m.view);
      const size_t groups = (rows + 15) / 16, nsb = cols / kSuperBlock;
      EXPECT_EQ(InterleavedGroupBytes(t, cols), 16 * WeightRowBytes(t, cols));
      EXPECT_EQ(InterleavedGroupBytes(t, cols) % 64, 0u);
      EXPECT_EQ(MatrixBytes(t, WeightLayout::kInterleaved16, rows, cols), groups * InterleavedGroupBytes(t, cols));
      for (size_t r = 0; r < groups * 16; ++r) {
        for (size_t s = 0; s < nsb; ++s) {
          BlockIQ4_XS back, want = {};
          ReadInterleavedSuperBlock(il.view, r, s, &back);
          if (r < rows) std::memcpy(&want, m.bytes.data() + (r * nsb + s) * sizeof(want), sizeof(want));
          ASSERT_EQ(std::memcmp(&back, &want, sizeof(want)), 0) << rows << "x" << cols << " r=" << r << " s=" << s;
        }
        for (size_t c = 0; c < cols; c += 37) {
          const float want = r < rows ? ref::DequantizeWeight(m.view, r, c) : 0.0f;
          ASSERT_EQ(ref::DequantizeWeight(il.view, r, c), want) << rows << "x" << cols << " r=" << r << " c=" << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MATVEC_IQ4XS_INTERLEAVED_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

// One super-block, a few, past the 16-super-block activation chunk and past
// 64 (matvec_kquant.cc's chunk).
const size_t kCols[] = {256, 3 * 256, 2048, 4096 + 256, 16384 + 512};

// MatVec on the interleaved copy == the Q8_K reference on the GGUF rows ==
// the reference reading the interleaved copy, bit for bit; row ranges.
void TestInterleavedIQ4XSEqualsQ8KReference() {
  ExpectInterleavedKQuantEqualsQ8KReference({WeightType::kIQ4_XS}, {std::begin(kCols), std::end(kCols)}, 73);
}

// Extreme blocks: every byte but d 0x00, 0xFF, 0xAA or 0x55 (levels −127
// and 113 everywhere, scales −32 and 31) against activations whose codes are
// all ±127 (one sign, alternating, by halves of 32): the largest int16 pairs
// of the AVX2 path, the largest dots of the AVX3_DL one and the largest S;
// MatVec and an 8-vector MatMul tile, bit for bit.
void TestInterleavedIQ4XSExtremeBlocks() {
  std::mt19937 rng(79);
  const size_t cols = 3 * kSuperBlock, rows = 19, n = 8;
  for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0xAA}, uint8_t{0x55}}) {
    TestMatrix m = RandomMatrix(WeightType::kIQ4_XS, rows, cols, rng);
    for (size_t off = 0; off < m.bytes.size(); off += sizeof(BlockIQ4_XS)) {
      std::fill(m.bytes.begin() + off + sizeof(uint16_t), m.bytes.begin() + off + sizeof(BlockIQ4_XS), fill);  // d first
    }
    const TestMatrix il = InterleavedCopy(m.view);
    std::vector<float> x(n * cols);  // [n][cols]: vector v has sign pattern v % 3
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t pattern = i / cols % 3, c = i % cols;
      x[i] = pattern == 0 ? 3.0f : pattern == 1 ? (c % 2 == 0 ? 3.0f : -3.0f) : (c % 64 < 32 ? -3.0f : 3.0f);
    }
    std::vector<float> y(n * rows), want(rows);
    MatMul(il.view, x.data(), n, y.data(), nullptr);
    for (size_t v = 0; v < n; ++v) {
      ref::MatVecRowsQ8K(m.view, x.data() + v * cols, want.data(), 0, rows);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[v * rows + r], want[r]) << "fill=" << int{fill} << " v=" << v << " r=" << r;
      }
    }
  }
}

// MatMul (tiles of 8, 4, 2, 1 vectors and their tails) and multi-threaded
// MatVec equal single-threaded MatVec bit for bit on both layouts, and the
// interleaved results equal the rows' ones. Under qemu and the sanitizers
// (KVEDGE_TEST_SCALE < 1) the long row shrinks to 768 columns.
void TestInterleavedIQ4XSMatMulAndThreads() {
  // 26 super-blocks: past the 24 of an activation chunk.
  const size_t long_cols = static_cast<size_t>(ScaledCount(6144 + 512, 768)) / kSuperBlock * kSuperBlock;
  ExpectMatMulEqualsMatVecForTypes({WeightType::kIQ4_XS}, {512, long_cols}, 83, RandomKQuantActivations,
                                   {{37, 64}, {1, 2, 3, 4, 5, 8, 9, 15}, true});
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_BEFORE_TEST(IQ4XSInterleavedTest);
HWY_EXPORT_AND_TEST_P(IQ4XSInterleavedTest, TestInterleavedIQ4XSEqualsQ8KReference);
HWY_EXPORT_AND_TEST_P(IQ4XSInterleavedTest, TestInterleavedIQ4XSExtremeBlocks);
HWY_EXPORT_AND_TEST_P(IQ4XSInterleavedTest, TestInterleavedIQ4XSMatMulAndThreads);

}  // namespace kvedge
#endif  // HWY_ONCE
