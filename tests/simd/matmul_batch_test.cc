// The batched-decode K-quant MatMul (matmul_batch.cc) against the
// single-row kernel and llama.cpp's integer dot product (ref::MatVecRowsQ8K),
// bit for bit, once per compiled Highway target (the fixture restricts
// dispatch to that target): every batch size 1…17 (the per-vector row tiles,
// the 8- and 16-lane passes and their tails), row counts that are not multiples of the 4-row tile,
// column counts across the 16-super-block activation chunk, zero and outlier
// activation super-blocks, on no arena and on a 3-thread one.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <random>
#include <vector>

#include "platform/thread_arena.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "tests/testing/random_weights.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matmul_batch_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATMUL_BATCH_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATMUL_BATCH_TEST_HELPERS_
namespace kvedge {
namespace {

constexpr WeightType kTypes[] = {WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K};

// [n][cols] N(0, 1) activations; vector v has its super-block v % nsb zeroed
// and an outlier in the next one (Q8_K's per-super-block scale follows them).
std::vector<float> RandomBatch(size_t n, size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n * cols);
  for (float& f : x) f = dist(rng);
  const size_t nsb = cols / kSuperBlock;
  for (size_t v = 0; v < n; ++v) {
    float* row = x.data() + v * cols;
    const size_t zero = v % nsb;
    std::fill(row + zero * kSuperBlock, row + (zero + 1) * kSuperBlock, 0.0f);
    row[((zero + 1) % nsb) * kSuperBlock + v % kSuperBlock] = (v % 2 ? -1.0f : 1.0f) * 60.0f;
  }
  return x;
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MATMUL_BATCH_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

void TestBatchMatMulEqualsMatVec() {
  std::mt19937 rng(61);
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(3).value();
  for (WeightType t : kTypes) {
    // 101 × 4864: several of the per-vector path's L2 row tiles (2–3 vectors).
    // It is 85% of the sweep's work; under qemu and the sanitizers
    // (KVEDGE_TEST_SCALE < 1) it takes only n ≤ 3, the per-vector path it is
    // there for (13 × 4864 runs every lane tile and tail).
    for (const auto& [rows, cols] :
         {std::pair<size_t, size_t>{37, 256}, {6, 2304}, {13, 16 * 256 + 3 * 256}, {101, 16 * 256 + 3 * 256}}) {
      const TestMatrix m = RandomMatrix(t, rows, cols, rng);
      const size_t max_n = rows == 101 && QuickRun() ? 3 : 17;
      for (size_t n = 1; n <= max_n; ++n) {
        const std::vector<float> x = RandomBatch(n, cols, rng);
        ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(m.view, x, n, arena.get()));
      }
    }
  }
}

// MatMul equals the scalar reference row by row (the definition, not only
// the single-row kernel).
void TestBatchMatMulEqualsQ8KReference() {
  std::mt19937 rng(67);
  for (WeightType t : kTypes) {
    const size_t rows = 11, cols = 5 * 256, n = 16;
    const TestMatrix m = RandomMatrix(t, rows, cols, rng);
    const std::vector<float> x = RandomBatch(n, cols, rng);
    std::vector<float> y(n * rows), want(rows);
    MatMul(m.view, x.data(), n, y.data(), nullptr);
    for (size_t v = 0; v < n; ++v) {
      ref::MatVecRowsQ8K(m.view, x.data() + v * cols, want.data(), 0, rows);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[v * rows + r], want[r]) << WeightTypeName(t) << " v=" << v << " r=" << r;
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

HWY_BEFORE_TEST(BatchMatMulTest);
HWY_EXPORT_AND_TEST_P(BatchMatMulTest, TestBatchMatMulEqualsMatVec);
HWY_EXPORT_AND_TEST_P(BatchMatMulTest, TestBatchMatMulEqualsQ8KReference);

}  // namespace kvedge
#endif  // HWY_ONCE
