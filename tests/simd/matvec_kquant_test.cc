// The Q8_K-activation kernels (matvec_kquant.cc: Q2_K … Q6_K, IQ4_XS) against llama.cpp's
// integer dot product (ref::MatVecRowsQ8K, bit for bit) and against the f32
// product within the activation-rounding bound, once per compiled Highway
// target (the fixture restricts dispatch to that target). Matrices are
// random bytes with finite f16 scale fields: every bit pattern of codes and
// packed scales is a valid block.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "simd/float16.h"
#include "simd/matvec_kquant.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "tests/testing/random_weights.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matvec_kquant_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATVEC_KQUANT_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATVEC_KQUANT_TEST_HELPERS_
namespace kvedge {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;
constexpr WeightType kTypes[] = {WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kQ4_K,
                                  WeightType::kQ5_K, WeightType::kQ6_K, WeightType::kIQ4_XS};

// ggml's quantize_row_q8_K on a hand-checked block: max is the value of
// largest magnitude (−2), iscale = −127/max = 63.5, ties round to even.
TEST(QuantizeRowQ8KTest, MatchesGgmlDefinition) {
  float x[kSuperBlock] = {1.0f, -2.0f, 0.5f, 2.0f, -0.25f};
  BlockQ8_K b;
  QuantizeRowQ8_K(x, &b, kSuperBlock);
  EXPECT_EQ(b.d, 1.0f / 63.5f);
  EXPECT_EQ(b.qs[0], 64);    // 63.5 → 64 (even)
  EXPECT_EQ(b.qs[1], -127);  // the max itself
  EXPECT_EQ(b.qs[2], 32);    // 31.75
  EXPECT_EQ(b.qs[3], 127);   // 127 (the first of equal magnitudes sets the sign)
  EXPECT_EQ(b.qs[4], -16);   // −15.875
  EXPECT_EQ(b.bsums[0], 64 - 127 + 32 + 127 - 16);
  for (int j = 1; j < 16; ++j) EXPECT_EQ(b.bsums[j], 0);
  // All-zero block: everything zero.
  std::fill(x, x + kSuperBlock, 0.0f);
  QuantizeRowQ8_K(x, &b, kSuperBlock);
  EXPECT_EQ(b.d, 0.0f);
  for (int j = 0; j < kSuperBlock; ++j) ASSERT_EQ(b.qs[j], 0);
}

// Random blocks: codes within ±127, d·q within |d|/2 of x, bsums exact.
TEST(QuantizeRowQ8KTest, RoundsEveryValueToNearest) {
  std::mt19937 rng(5);
  const std::vector<float> x = RandomKQuantActivations(4 * kSuperBlock, rng);
  std::vector<BlockQ8_K> b(4);
  QuantizeRowQ8_K(x.data(), b.data(), x.size());
  for (size_t s = 0; s < 4; ++s) {
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) {
        const int i = 16 * j + k;
        sum += b[s].qs[i];
        ASSERT_LE(std::fabs(static_cast<double>(b[s].d) * b[s].qs[i] - x[s * kSuperBlock + i]),
                  std::fabs(b[s].d) * (0.5 + 1e-5) + 1e-30);
      }
      ASSERT_EQ(b[s].bsums[j], sum);
    }
  }
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MATVEC_KQUANT_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

// Column counts: one super-block, a few, and past the 64-super-block
// activation chunk (16384 columns) so the running sum crosses chunks.
const size_t kCols[] = {256, 3 * 256, 4096 + 256, 16384 + 512};

// Bit for bit llama.cpp's integer dot product (the scalar model).
void TestKQuantEqualsQ8KReference() {
  std::mt19937 rng(41);
  for (WeightType t : kTypes) {
    for (size_t cols : kCols) {
      for (size_t rows : {1u, 3u, 17u}) {
        const TestMatrix m = RandomMatrix(t, rows, cols, rng);
        const std::vector<float> x = RandomKQuantActivations(cols, rng);
        std::vector<float> y(rows), want(rows);
        MatVec(m.view, x.data(), y.data(), nullptr);
        ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
        for (size_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[r], want[r]) << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r;
        }
      }
    }
  }
}

// Activations that probe the vectorized Q8_K quantizer: equal magnitudes
// of both signs (the first one sets the scale's sign), products iscale·x on
// the .5 rounding ties (iscale = ±1), a zero super-block and a Gaussian one;
// bit for bit against the scalar definition.
void TestKQuantActivationTies() {
  std::mt19937 rng(53);
  std::uniform_int_distribution<int> half(-100, 100);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (WeightType t : kTypes) {
    const size_t cols = 4 * kSuperBlock, rows = 6;
    const TestMatrix m = RandomMatrix(t, rows, cols, rng);
    std::vector<float> x(cols, 0.0f);
    for (size_t i = 0; i < 2 * kSuperBlock; ++i) x[i] = static_cast<float>(half(rng)) + 0.5f;
    x[5] = -127.0f;  // block 0: max −127 first, then +127
    x[200] = 127.0f;
    x[kSuperBlock + 3] = 127.0f;  // block 1: +127 first
    x[kSuperBlock + 255] = -127.0f;
    for (size_t i = 3 * kSuperBlock; i < cols; ++i) x[i] = gauss(rng);
    std::vector<float> y(rows), want(rows);
    MatVec(m.view, x.data(), y.data(), nullptr);
    ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
    for (size_t r = 0; r < rows; ++r) ASSERT_EQ(y[r], want[r]) << WeightTypeName(t) << " r=" << r;
  }
}

// Extreme blocks: every code byte 0x00, 0xFF or 0xAA/0x55 (largest codes,
// scales, mins and IQ4 levels ±127 at once) against activations that all
// quantize to ±127 (one sign, or alternating, or opposite to the levels'
// signs): the largest pair sums and super-block sums the fast paths must
// hold without saturation; bit for bit against the reference.
void TestKQuantExtremeBlocks() {
  std::mt19937 rng(59);
  for (WeightType t : kTypes) {
    const size_t cols = 2 * kSuperBlock, rows = 7;
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0xAA}, uint8_t{0x55}}) {
      TestMatrix m = RandomMatrix(t, rows, cols, rng);
      const size_t block_bytes = GetWeightFormat(t).block_bytes;
      for (size_t off = 0; off < m.bytes.size(); off += block_bytes) {
        std::vector<uint8_t> halves(block_bytes);  // keep the f16 fields finite
        std::memcpy(halves.data(), m.bytes.data() + off, block_bytes);
        std::fill(m.bytes.begin() + off, m.bytes.begin() + off + block_bytes, fill);
        for (size_t field : HalfFields(t)) std::memcpy(&m.bytes[off + field], &halves[field], 2);
      }
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<float> x(cols);
        for (size_t i = 0; i < cols; ++i) {
          const float sign = pattern == 0 ? 1.0f : pattern == 1 ? (i % 2 == 0 ? 1.0f : -1.0f) : (i % 32 < 16 ? -1.0f : 1.0f);
          x[i] = 3.0f * sign;
        }
        std::vector<float> y(rows), want(rows);
        MatVec(m.view, x.data(), y.data(), nullptr);
        ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
        for (size_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[r], want[r]) << WeightTypeName(t) << " fill=" << int{fill} << " pattern=" << pattern << " r=" << r;
        }
      }
    }
  }
}

// Against the exact product of the f32 weights: the error is the activation
// rounding, |Σ w·(x − dx·q)| ≤ Σ_c |w_c|·|dx|/2 per super-block, plus the
// f32 roundings of the dequantized weights (≤ 3u·(|w| + |dmin·m|), m ≤ 63)
// and of the per-super-block folds (≤ (nsb + 4)·u·Σ|w·x̂|).
void TestKQuantWithinActivationRounding() {
  std::mt19937 rng(43);
  for (WeightType t : kTypes) {
    for (size_t cols : kCols) {
      const size_t rows = 5, nsb = cols / kSuperBlock;
      const TestMatrix m = RandomMatrix(t, rows, cols, rng);
      const std::vector<float> x = RandomKQuantActivations(cols, rng);
      std::vector<BlockQ8_K> a(nsb);
      QuantizeRowQ8_K(x.data(), a.data(), cols);
      std::vector<float> y(rows), want(rows), w(cols);
      MatVec(m.view, x.data(), y.data(), nullptr);
      ref::MatVecRows(m.view, x.data(), want.data(), 0, rows);
      const size_t block_bytes = GetWeightFormat(t).block_bytes;
      for (size_t r = 0; r < rows; ++r) {
        ref::DequantizeRow(m.view, r, w.data());
        double bound = 0;
        for (size_t s = 0; s < nsb; ++s) {
          double dmin = 0;
          if (HalfFields(t).size() > 1) {  // a dmin field
            uint16_t h;
            std::memcpy(&h, m.bytes.data() + (r * nsb + s) * block_bytes + HalfFields(t)[1], 2);
            dmin = std::fabs(F32FromF16(h));
          }
          for (size_t i = 0; i < static_cast<size_t>(kSuperBlock); ++i) {
            const size_t c = s * kSuperBlock + i;
            const double xq = std::fabs(static_cast<double>(a[s].d) * a[s].qs[i]);
            bound += std::fabs(w[c]) * std::fabs(a[s].d) * 0.5;
            bound += 3 * kUnitRoundoff * (std::fabs(w[c]) + 63 * dmin) * std::max<double>(xq, std::fabs(x[c]));
            bound += (nsb + 4) * kUnitRoundoff * (std::fabs(w[c]) + 63 * dmin) * xq;
          }
        }
        ASSERT_LE(std::fabs(y[r] - want[r]), bound + 1e-30) << WeightTypeName(t) << " cols=" << cols << " r=" << r;
      }
    }
  }
}

// Every row range [begin, end) of a 9-row matrix (1…9 rows, odd offsets: the
// row passes' tails) against the reference, bit for bit, with y untouched
// outside the range; with extreme blocks: a row of all-ones bits (largest
// codes, scales and mins; Q6_K scales −1) and d = ±1, an all-zero row, and
// activations whose Q8_K codes are all ±127 (a constant super-block and an
// alternating one).
void TestKQuantRowRangesAndExtremeBlocks() {
  std::mt19937 rng(59);
  for (WeightType t : kTypes) {
    const size_t block_bytes = GetWeightFormat(t).block_bytes;
    for (size_t cols : {size_t{256}, size_t{512}, size_t{1280}, size_t{4096}}) {
      const size_t rows = 9, row_bytes = WeightRowBytes(t, cols);
      TestMatrix m = RandomMatrix(t, rows, cols, rng);
      std::fill(m.bytes.begin() + 2 * row_bytes, m.bytes.begin() + 3 * row_bytes, uint8_t{0xFF});
      std::fill(m.bytes.begin() + 4 * row_bytes, m.bytes.begin() + 5 * row_bytes, uint8_t{0});
      for (size_t off = 2 * row_bytes; off < 3 * row_bytes; off += block_bytes) {
        for (size_t field : HalfFields(t)) {
          const uint16_t h = F16FromF32(off % (2 * block_bytes) == 0 ? 1.0f : -1.0f);
          std::memcpy(&m.bytes[off + field], &h, 2);
        }
      }
      std::vector<float> x = RandomKQuantActivations(cols, rng);
      std::fill(x.begin(), x.begin() + kSuperBlock, 3.0f);  // codes all −127
      if (cols >= 2 * kSuperBlock) {
        for (size_t i = kSuperBlock; i < 2 * kSuperBlock; ++i) x[i] = i % 2 == 0 ? -5.0f : 5.0f;  // ±127
      }
      std::vector<float> want(rows);
      ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
      for (size_t begin = 0; begin < rows; ++begin) {
        for (size_t end = begin + 1; end <= rows; ++end) {
          std::vector<float> y(rows, -7.0f);
          KQuantRows(m.view, x.data(), 1, y.data(), begin, end);
          for (size_t r = 0; r < rows; ++r) {
            ASSERT_EQ(y[r], r >= begin && r < end ? want[r] : -7.0f)
                << WeightTypeName(t) << " cols=" << cols << " rows [" << begin << ", " << end << ") r=" << r;
          }
        }
      }
    }
  }
}

// MatMul (tiles of 4 vectors and their tails) and multi-threaded MatVec
// equal single-threaded MatVec bit for bit.
void TestKQuantMatMulAndThreads() {
  ExpectMatMulEqualsMatVecForTypes({std::begin(kTypes), std::end(kTypes)}, {512, 16384 + 256}, 47,
                                   RandomKQuantActivations);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_BEFORE_TEST(KQuantKernelsTest);
HWY_EXPORT_AND_TEST_P(KQuantKernelsTest, TestKQuantEqualsQ8KReference);
HWY_EXPORT_AND_TEST_P(KQuantKernelsTest, TestKQuantActivationTies);
HWY_EXPORT_AND_TEST_P(KQuantKernelsTest, TestKQuantExtremeBlocks);
HWY_EXPORT_AND_TEST_P(KQuantKernelsTest, TestKQuantWithinActivationRounding);
HWY_EXPORT_AND_TEST_P(KQuantKernelsTest, TestKQuantRowRangesAndExtremeBlocks);
HWY_EXPORT_AND_TEST_P(KQuantKernelsTest, TestKQuantMatMulAndThreads);

}  // namespace kvedge
#endif  // HWY_ONCE
