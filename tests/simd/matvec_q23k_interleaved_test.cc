// Q3_K and Q2_K in the interleaved layout (kInterleaved16, matvec_q23k_interleaved.cc):
// the layout round trip, and per compiled Highway target (the fixture
// restricts dispatch to that target) MatVec against llama.cpp's integer dot
// product (ref::MatVecRowsQ8K on the GGUF rows, bit for bit), MatMul and
// threads against MatVec, on both layouts.
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
#include "simd/matvec_kquant.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"
#include "tests/testing/random_weights.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matvec_q23k_interleaved_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATVEC_Q23K_INTERLEAVED_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATVEC_Q23K_INTERLEAVED_TEST_HELPERS_
namespace kvedge {
namespace {

// An interleaved copy of a kRows matrix, owning its 64-byte aligned bytes.
struct InterleavedMatrix {
  std::vector<uint64_t> storage;
  MatrixView view;
};

InterleavedMatrix Interleave(const MatrixView& src) {
  InterleavedMatrix m;
  const size_t bytes = MatrixBytes(src.type, WeightLayout::kInterleaved16, src.rows, src.cols);
  m.storage.assign(bytes / 8 + 8, 0);
  auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m.storage.data()) + 63) & ~uintptr_t{63});
  InterleaveGroups(src, 0, InterleavedGroups(src.rows), base);
  m.view = InterleavedView(src, base);
  return m;
}

// N(0, 1) activations with a zero super-block and an outlier when long enough.
std::vector<float> RandomVector(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  if (n >= 3 * kSuperBlock) {
    std::fill(v.begin() + kSuperBlock, v.begin() + 2 * kSuperBlock, 0.0f);
    v[2 * kSuperBlock + 7] = 40.0f;
  }
  return v;
}

const WeightType kTypes[] = {WeightType::kQ3_K, WeightType::kQ2_K};

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
        const InterleavedMatrix il = Interleave(m.view);
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
            ReadInterleavedQ23K(il.view, r, s, &back);
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
// the reference reading the interleaved copy, bit for bit; rows that fill
// groups and rows that leave the last group partial.
void TestInterleavedQ23KEqualsQ8KReference() {
  std::mt19937 rng(73);
  for (WeightType t : kTypes) {
  for (size_t cols : kCols) {
    for (size_t rows : {1u, 3u, 16u, 17u, 40u}) {
      const TestMatrix m = RandomMatrix(t, rows, cols, rng);
      const InterleavedMatrix il = Interleave(m.view);
      const std::vector<float> x = RandomVector(cols, rng);
      std::vector<float> y(rows), want(rows), back(rows);
      MatVec(il.view, x.data(), y.data(), nullptr);
      ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
      ref::MatVecRowsQ8K(il.view, x.data(), back.data(), 0, rows);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[r], want[r]) << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r;
        ASSERT_EQ(back[r], want[r]) << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r;
      }
    }
  }
  }
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
    const InterleavedMatrix il = Interleave(m.view);
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
void TestInterleavedQ23KMatMulAndThreads() {
  std::mt19937 rng(83);
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(3).value();
  for (WeightType t : kTypes) {
  // QuickRun (qemu, sanitizers): an odd short row (768 columns) instead of the long one, the same
  // tiles, tails and odd super-block count at a sixth of the emulated work.
  for (size_t cols : {size_t{512}, QuickRun() ? size_t{768} : size_t{4096 + 512}}) {
    for (size_t rows : {size_t{37}, size_t{64}}) {
      const TestMatrix m = RandomMatrix(t, rows, cols, rng);
      const InterleavedMatrix il = Interleave(m.view);
      for (size_t n : {1u, 2u, 3u, 4u, 5u, 8u, 9u, 15u}) {
        const std::vector<float> x = RandomVector(n * cols, rng);  // [n][cols]
        ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(m.view, x, n, arena.get()));
        ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(il.view, x, n, arena.get()));
        std::vector<float> y_rows(n * rows), y_il(n * rows);
        MatMul(m.view, x.data(), n, y_rows.data(), nullptr);
        MatMul(il.view, x.data(), n, y_il.data(), arena.get());
        for (size_t i = 0; i < n * rows; ++i) ASSERT_EQ(y_il[i], y_rows[i]) << WeightTypeName(t) << " n=" << n << " i=" << i;
      }
    }
  }
  }
}

// Row ranges of whole groups (the last one partial) write those rows only.
void TestInterleavedQ23KRowRanges() {
  std::mt19937 rng(89);
  const size_t rows = 40, cols = 512;
  for (WeightType t : kTypes) {
  const TestMatrix m = RandomMatrix(t, rows, cols, rng);
  const InterleavedMatrix il = Interleave(m.view);
  const std::vector<float> x = RandomVector(cols, rng);
  std::vector<float> want(rows);
  ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
  for (size_t begin = 0; begin < rows; begin += 16) {
    for (size_t end : {begin + 16, rows}) {
      if (end > rows || end <= begin) continue;
      std::vector<float> y(rows, -7.0f);
      MatVecRows(il.view, x.data(), y.data(), begin, end);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[r], r >= begin && r < end ? want[r] : -7.0f)
            << WeightTypeName(t) << " [" << begin << ", " << end << ") r=" << r;
      }
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

HWY_BEFORE_TEST(Q23KInterleavedTest);
HWY_EXPORT_AND_TEST_P(Q23KInterleavedTest, TestInterleavedQ23KEqualsQ8KReference);
HWY_EXPORT_AND_TEST_P(Q23KInterleavedTest, TestInterleavedQ23KExtremeBlocks);
HWY_EXPORT_AND_TEST_P(Q23KInterleavedTest, TestInterleavedQ23KMatMulAndThreads);
HWY_EXPORT_AND_TEST_P(Q23KInterleavedTest, TestInterleavedQ23KRowRanges);

}  // namespace kvedge
#endif  // HWY_ONCE
