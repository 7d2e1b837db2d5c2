// Random weight matrices for kernel tests: random bytes (every bit pattern of
// codes and packed scales is a valid block) with the f16 scale fields set to
// finite values in ±[1e-3, 1e-1], a few exactly zero.
#ifndef KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_
#define KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "simd/float16.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"

namespace kvedge {

// Byte offsets of the f16 fields (scales, mins) inside one block of t.
inline std::vector<size_t> HalfFields(WeightType t) {
  switch (t) {
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

}  // namespace kvedge

#endif  // KVEDGE_TESTS_TESTING_RANDOM_WEIGHTS_H_
