// Random weight matrices for kernel tests: random bytes (every bit pattern of
// codes and packed scales is a valid block) with the f16 scale fields set to
// finite values in ±[1e-3, 1e-1], a few exactly zero.
#ifndef KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_
#define KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "platform/thread_arena.h"

#include "simd/float16.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"

namespace kvedge {

// Under qemu and the sanitizers (KVEDGE_TEST_SCALE < 1, read as
// testing::ScaledCount reads it) the long kernel sweeps take a shorter case
// of the same tiles and tails. (tests/testing/test_data.h cannot be included
// here: its namespace kvedge::testing hides ::testing from Highway's
// HWY_BEFORE_TEST inside namespace kvedge.)
inline bool QuickRun() {
  const char* scale = std::getenv("KVEDGE_TEST_SCALE");
  return scale != nullptr && std::atof(scale) < 1.0;
}

// Byte offsets of the f16 fields (scales, mins) inside one block of t.
inline std::vector<size_t> HalfFields(WeightType t) {
  switch (t) {
    case WeightType::kQ8_0: return {offsetof(BlockQ8_0, d)};
    case WeightType::kQ4_0: return {offsetof(BlockQ4_0, d)};
    case WeightType::kQ4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case WeightType::kQ5_0: return {offsetof(BlockQ5_0, d)};
    case WeightType::kQ5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case WeightType::kQ2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case WeightType::kQ3_K: return {offsetof(BlockQ3_K, d)};
    case WeightType::kQ4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case WeightType::kQ5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case WeightType::kQ6_K: return {offsetof(BlockQ6_K, d)};
    case WeightType::kIQ4_NL: return {offsetof(BlockIQ4_NL, d)};
    case WeightType::kIQ4_XS: return {offsetof(BlockIQ4_XS, d)};
    default: return {};
  }
}

// The weight types of one kernel family, in table order.
inline std::vector<WeightType> TypesWithKernel(WeightKernel k) {
  std::vector<WeightType> out;
  for (int i = 0; i < kNumWeightTypes; ++i) {
    const auto t = static_cast<WeightType>(i);
    if (GetWeightFormat(t).kernel == k) out.push_back(t);
  }
  return out;
}

struct TestMatrix {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

// A rows × cols matrix of type t (a block type of HalfFields).
inline TestMatrix RandomMatrix(WeightType t, size_t rows, size_t cols, std::mt19937& rng) {
  const WeightFormat& f = GetWeightFormat(t);
  TestMatrix m;
  m.bytes.resize(rows * WeightRowBytes(t, cols));
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(1e-3f, 1e-1f);
  for (size_t off = 0; off < m.bytes.size(); off += f.block_bytes) {
    for (size_t field : HalfFields(t)) {
      const float v = rng() % 16 == 0 ? 0.0f : (rng() & 1 ? 1.0f : -1.0f) * mag(rng);
      const uint16_t h = F16FromF32(v);
      std::memcpy(&m.bytes[off + field], &h, 2);
    }
  }
  m.view = MatrixView{t, m.bytes.data(), rows, cols};
  return m;
}

// The kInterleaved16 copy of a row-major IsInterleavable matrix, as the
// loader makes it (InterleaveGroups into a 64-byte aligned buffer).
inline TestMatrix InterleavedCopy(const MatrixView& src) {
  TestMatrix m;
  m.bytes.resize(MatrixBytes(src.type, WeightLayout::kInterleaved16, src.rows, src.cols) + 63);
  auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m.bytes.data()) + 63) & ~uintptr_t{63});
  InterleaveGroups(src, 0, InterleavedGroups(src.rows), base);
  m.view = InterleavedView(src, base);
  return m;
}

// MatMul of x ([n][cols]) on no arena and on `arena`, and (n = 1)
// multi-threaded MatVec, equal single-threaded MatVec row by row, bit for bit.
inline void ExpectMatMulEqualsMatVec(const MatrixView& m, const std::vector<float>& x, size_t n, ThreadArena* arena) {
  const size_t rows = m.rows, cols = m.cols;
  std::vector<float> want(n * rows), y(n * rows);  // [n][rows]
  for (size_t v = 0; v < n; ++v) MatVec(m, x.data() + v * cols, want.data() + v * rows, nullptr);
  for (ThreadArena* a : {static_cast<ThreadArena*>(nullptr), arena}) {
    std::fill(y.begin(), y.end(), -1.0f);
    MatMul(m, x.data(), n, y.data(), a);
    for (size_t i = 0; i < n * rows; ++i) ASSERT_EQ(y[i], want[i]) << WeightTypeName(m.type) << " n=" << n << " i=" << i;
    if (n == 1) {
      std::fill(y.begin(), y.end(), -1.0f);
      MatVec(m, x.data(), y.data(), a);
      for (size_t r = 0; r < rows; ++r) ASSERT_EQ(y[r], want[r]) << WeightTypeName(m.type) << " r=" << r;
    }
  }
}

// ExpectMatMulEqualsMatVec for a random 37-row matrix of each type at each
// column count, with n = 1, 2, 4, 5, 9 input vectors (the 4- and 8-vector
// tiles and their tails) and a 3-thread arena. make_x(count, rng) gives
// count activations.
template <class MakeX>
void ExpectMatMulEqualsMatVecForTypes(const std::vector<WeightType>& types, const std::vector<size_t>& cols_list,
                                      uint32_t seed, MakeX make_x) {
  std::mt19937 rng(seed);
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(3).value();
  for (WeightType t : types) {
    for (size_t cols : cols_list) {
      const TestMatrix m = RandomMatrix(t, 37, cols, rng);
      for (size_t n : {1u, 2u, 4u, 5u, 9u}) {
        const std::vector<float> x = make_x(n * cols, rng);  // [n][cols]
        ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(m.view, x, n, arena.get()));
      }
    }
  }
}

}  // namespace kvedge

#endif  // KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_
