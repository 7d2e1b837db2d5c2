// Random weight matrices for kernel tests: random bytes (every bit pattern of
// codes and packed scales is a valid block) with the f16 scale fields set to
// finite values in ±[1e-3, 1e-1], a few exactly zero.
#ifndef KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_
#define KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "platform/thread_arena.h"

#include "simd/float16.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"
#include "tests/testing/test_scale.h"

namespace kvedge {

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

// N(0, 1) activations for the Q8_K-activation (K-quant) kernels, with a
// zero super-block and an outlier when n ≥ 3 super-blocks (Q8_K's
// per-block scale must follow them).
inline std::vector<float> RandomKQuantActivations(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  if (n >= 3 * kSuperBlock) {
    std::fill(v.begin() + kSuperBlock, v.begin() + 2 * kSuperBlock, 0.0f);
    v[2 * kSuperBlock + 7] = 40.0f;
  }
  return v;
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

// What ExpectMatMulEqualsMatVecForTypes sweeps besides types and columns.
struct MatMulSweep {
  std::vector<size_t> rows = {37};
  std::vector<size_t> batches = {1, 2, 4, 5, 9};  // the 4- and 8-vector tiles and their tails
  // Also on each matrix's kInterleaved16 copy (InterleavedCopy), whose
  // MatMul must equal the rows' bit for bit.
  bool interleaved = false;
};

// ExpectMatMulEqualsMatVec for a random matrix of each type, column count
// and sweep.rows, with each of sweep.batches input vectors and a 3-thread
// arena. make_x(count, rng) gives count activations.
template <class MakeX>
void ExpectMatMulEqualsMatVecForTypes(const std::vector<WeightType>& types, const std::vector<size_t>& cols_list,
                                      uint32_t seed, MakeX make_x, const MatMulSweep& sweep = {}) {
  std::mt19937 rng(seed);
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(3).value();
  for (WeightType t : types) {
    for (size_t cols : cols_list) {
      for (size_t rows : sweep.rows) {
        const TestMatrix m = RandomMatrix(t, rows, cols, rng);
        const TestMatrix il = sweep.interleaved ? InterleavedCopy(m.view) : TestMatrix{};
        for (size_t n : sweep.batches) {
          const std::vector<float> x = make_x(n * cols, rng);  // [n][cols]
          ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(m.view, x, n, arena.get()));
          if (!sweep.interleaved) continue;
          ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(il.view, x, n, arena.get()));
          std::vector<float> y_rows(n * rows), y_il(n * rows);
          MatMul(m.view, x.data(), n, y_rows.data(), nullptr);
          MatMul(il.view, x.data(), n, y_il.data(), arena.get());
          for (size_t i = 0; i < n * rows; ++i) {
            ASSERT_EQ(y_il[i], y_rows[i])
                << WeightTypeName(t) << " " << rows << "x" << cols << " n=" << n << " i=" << i;
          }
        }
      }
    }
  }
}

// The interleaved Q8_K-activation kernels: for each type and column count,
// MatVec on the kInterleaved16 copy == ref::MatVecRowsQ8K on the GGUF rows
// == the reference reading the copy, bit for bit, on rows that fill groups
// and rows that leave the last group partial; and MatVecRows over row
// ranges of whole groups (the last one partial) writes those rows only.
inline void ExpectInterleavedKQuantEqualsQ8KReference(const std::vector<WeightType>& types,
                                                      const std::vector<size_t>& cols_list, uint32_t seed) {
  std::mt19937 rng(seed);
  for (WeightType t : types) {
    for (size_t cols : cols_list) {
      for (size_t rows : {1u, 3u, 16u, 17u, 40u}) {
        const TestMatrix m = RandomMatrix(t, rows, cols, rng);
        const TestMatrix il = InterleavedCopy(m.view);
        const std::vector<float> x = RandomKQuantActivations(cols, rng);
        std::vector<float> y(rows), want(rows), back(rows);
        MatVec(il.view, x.data(), y.data(), nullptr);
        ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
        ref::MatVecRowsQ8K(il.view, x.data(), back.data(), 0, rows);
        for (size_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[r], want[r]) << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r;
          ASSERT_EQ(back[r], want[r]) << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r;
        }
        if (rows != 40) continue;
        for (size_t begin = 0; begin < rows; begin += 16) {
          for (size_t end : {begin + 16, rows}) {
            if (end > rows || end <= begin) continue;
            std::vector<float> part(rows, -7.0f);
            MatVecRows(il.view, x.data(), part.data(), begin, end);
            for (size_t r = 0; r < rows; ++r) {
              ASSERT_EQ(part[r], r >= begin && r < end ? want[r] : -7.0f)
                  << WeightTypeName(t) << " x" << cols << " [" << begin << ", " << end << ") r=" << r;
            }
          }
        }
      }
    }
  }
}

}  // namespace kvedge

#endif  // KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_
