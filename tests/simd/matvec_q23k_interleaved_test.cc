// Q3_K and Q2_K in the interleaved layout (kInterleaved16, matvec_q23k_interleaved.cc):
// Q3_K's code re-coding, the layout round trip, and per compiled Highway target (the fixture
// restricts dispatch to that target) MatVec against llama.cpp's integer dot
// product (ref::MatVecRowsQ8K on the GGUF rows, bit for bit), MatMul and
// threads against MatVec, on both layouts.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "platform/thread_arena.h"
#include "simd/float16.h"
#include "simd/matvec_kquant.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"
#include "tests/testing/random_weights.h"
#include "tests/testing/test_scale.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matvec_q23k_interleaved_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATVEC_Q23K_INTERLEAVED_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATVEC_Q23K_INTERLEAVED_TEST_HELPERS_
namespace kvedge {
namespace {

const WeightType kTypes[] = {WeightType::kQ3_K, WeightType::kQ2_K};

// Q3_K's re-coded codes (model_kernels.h): on random blocks, every
// weight's code as the layout's formulas read it from x is GGUF's (q + 4),
// and the encoder and decoder are each other's inverse both ways.
TEST(Q23KInterleavedLayoutTest, Q3KCodesRoundTrip) {
  std::mt19937 rng(73);
  for (int n = 0; n < 200; ++n) {
    uint8_t qs[64], hmask[32], x[96], qs2[64], hmask2[32], x2[96];
    for (uint8_t& c : qs) c = static_cast<uint8_t>(rng());
    for (uint8_t& c : hmask) c = static_cast<uint8_t>(rng());
    EncodeQ3KCodes(qs, hmask, x);
    for (int i = 0; i < 256; ++i) {
      const int h = i / 128, j = i % 128 / 32, col = i % 32;
      const int want = (qs[32 * h + col] >> (2 * j) & 3) | (hmask[col] >> (4 * h + j) & 1) << 2;
      const int tri = i / 32, m = i % 32 / 4, t = i % 4;
      const int a = x[12 * tri + t], b = x[12 * tri + 4 + t], c = x[12 * tri + 8 + t];
      const int got[8] = {a & 7, a >> 3 & 7, b & 7, b >> 3 & 7, c & 7, c >> 3 & 7, (a >> 6) | (c >> 6 & 1) << 2,
                          (b >> 6) | (c >> 7) << 2};
      ASSERT_EQ(got[m], want) << "block " << n << " weight " << i;
    }
    DecodeQ3KCodes(x, qs2, hmask2);
    ASSERT_EQ(0, std::memcmp(qs, qs2, sizeof(qs)));
    ASSERT_EQ(0, std::memcmp(hmask, hmask2, sizeof(hmask)));
    for (uint8_t& c : x) c = static_cast<uint8_t>(rng());
    DecodeQ3KCodes(x, qs2, hmask2);
    EncodeQ3KCodes(qs2, hmask2, x2);
    ASSERT_EQ(0, std::memcmp(x, x2, sizeof(x)));
  }
}

// Lossless: every super-block reads back to its GGUF bytes, every weight
// dequantizes the same, padded rows are zero weights; the sizes are the
// layout's (16 rows' GGUF bytes per group; Q3_K: + 32 bytes when the
// super-blocks per row are odd; Q2_K groups and Q3_K bodies 64-byte
// aligned).
TEST(Q23KInterleavedLayoutTest, RoundTrip) {
  std::mt19937 rng(71);
  for (WeightType t : kTypes) {
    EXPECT_TRUE(IsInterleavable(t));
    const size_t block_bytes = GetWeightFormat(t).block_bytes;
    for (size_t rows : {1u, 16u, 17u, 40u}) {
      for (size_t cols : {256u, 768u, 1024u, 4096u + 256u}) {
        const TestMatrix m = RandomMatrix(t, rows, cols, rng);
        const TestMatrix il = InterleavedCopy(m.view);
        const size_t groups = (rows + 15) / 16, nsb = cols / kSuperBlock;
        const size_t group_bytes = InterleavedGroupBytes(t, cols);
        EXPECT_EQ(group_bytes, 16 * WeightRowBytes(t, cols) + (t == WeightType::kQ3_K && nsb % 2 == 1 ? 32 : 0));
        if (t == WeightType::kQ2_K) EXPECT_EQ(group_bytes % 64, 0u);
        if (t == WeightType::kQ3_K) {
          for (size_t s = 0; s < nsb; ++s) EXPECT_EQ(InterleavedQ3KBodyOffset(s) % 64, 0u);
        }
        EXPECT_EQ(MatrixBytes(t, WeightLayout::kInterleaved16, rows, cols), groups * group_bytes);
        for (size_t r = 0; r < groups * 16; ++r) {
          for (size_t s = 0; s < nsb; ++s) {
            BlockQ3_K back;  // the larger block
            ReadInterleavedSuperBlock(il.view, r, s, &back);
            std::vector<uint8_t> want(block_bytes, 0);
            if (r < rows) std::memcpy(want.data(), m.bytes.data() + (r * nsb + s) * block_bytes, block_bytes);
            ASSERT_EQ(std::memcmp(&back, want.data(), block_bytes), 0)
                << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r << " s=" << s;
          }
          for (size_t c = 0; c < cols; c += 37) {
            const float want = r < rows ? ref::DequantizeWeight(m.view, r, c) : 0.0f;
            ASSERT_EQ(ref::DequantizeWeight(il.view, r, c), want)
                << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r << " c=" << c;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MATVEC_Q23K_INTERLEAVED_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

// One super-block, a few, past the 16-super-block activation chunk and past
// 64 (matvec_kquant.cc's chunk).
const size_t kCols[] = {256, 3 * 256, 2048, 4096 + 256, 16384 + 512};

// MatVec on the interleaved copy == the Q8_K reference on the GGUF rows ==
// the reference reading the interleaved copy, bit for bit; row ranges.
void TestInterleavedQ23KEqualsQ8KReference() {
  ExpectInterleavedKQuantEqualsQ8KReference({std::begin(kTypes), std::end(kTypes)},
                                            {std::begin(kCols), std::end(kCols)}, 73);
}

// Extreme blocks: every byte but d (and dmin) 0x00, 0xFF, 0xAA or 0x55
// (largest codes, scales and mins at once; Q3_K: scales −32 and 31)
// against activations whose codes are all ±127 (one sign, alternating, by
// halves of 32): the largest int16 pair sums of the AVX2 path and the
// largest S and M; bit for bit.
void TestInterleavedQ23KExtremeBlocks() {
  std::mt19937 rng(79);
  const size_t cols = 3 * kSuperBlock, rows = 19;
  for (WeightType t : kTypes) {
  const size_t block_bytes = GetWeightFormat(t).block_bytes, keep = t == WeightType::kQ3_K ? 2 : 4;
  for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0xAA}, uint8_t{0x55}}) {
    TestMatrix m = RandomMatrix(t, rows, cols, rng);
    for (size_t off = 0; off < m.bytes.size(); off += block_bytes) {
      std::fill(m.bytes.begin() + off, m.bytes.begin() + off + block_bytes - keep, fill);  // d (and dmin) last
    }
    const TestMatrix il = InterleavedCopy(m.view);
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<float> x(cols);
      for (size_t i = 0; i < cols; ++i) {
        const float sign = pattern == 0 ? 1.0f : pattern == 1 ? (i % 2 == 0 ? 1.0f : -1.0f) : (i % 64 < 32 ? -1.0f : 1.0f);
        x[i] = 3.0f * sign;
      }
      std::vector<float> y(rows), want(rows);
      MatVec(il.view, x.data(), y.data(), nullptr);
      ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[r], want[r]) << WeightTypeName(t) << " fill=" << int{fill} << " pattern=" << pattern << " r=" << r;
      }
    }
  }
  }
}

// MatMul (tiles of 8, 4, 2, 1 vectors and their tails) and multi-threaded
// MatVec equal single-threaded MatVec bit for bit on both layouts, and the
// interleaved results equal the rows' ones.
// Under qemu and the sanitizers (KVEDGE_TEST_SCALE < 1) the long row
// shrinks to 768 columns: the same tiles, tails and odd super-block count.
void TestInterleavedQ23KMatMulAndThreads() {
  // 26 super-blocks: past the 24 of an activation chunk.
  const size_t long_cols = static_cast<size_t>(ScaledCount(6144 + 512, 768)) / kSuperBlock * kSuperBlock;
  ExpectMatMulEqualsMatVecForTypes({std::begin(kTypes), std::end(kTypes)}, {512, long_cols}, 83,
                                   RandomKQuantActivations, {{37, 64}, {1, 2, 3, 4, 5, 8, 9, 15}, true});
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_BEFORE_TEST(Q23KInterleavedTest);
HWY_EXPORT_AND_TEST_P(Q23KInterleavedTest, TestInterleavedQ23KEqualsQ8KReference);
HWY_EXPORT_AND_TEST_P(Q23KInterleavedTest, TestInterleavedQ23KExtremeBlocks);
HWY_EXPORT_AND_TEST_P(Q23KInterleavedTest, TestInterleavedQ23KMatMulAndThreads);

}  // namespace kvedge
#endif  // HWY_ONCE
