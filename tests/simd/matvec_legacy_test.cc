// The int8-activation kernels of the legacy 32-weight blocks (WeightKernel::
// kInt8: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; model_kernels.cc) against
// their integer model (ref::MatVecRowsQuantizedActivations) and the f32
// product, once per compiled Highway target (the fixture restricts dispatch
// to that target), on both weight layouts (kRows and the kInterleaved16 copy
// the loader makes). Matrices are random bytes with finite f16 scale and min
// fields: every code, fifth-bit and codebook pattern occurs.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "platform/target_report.h"
#include "simd/float16.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "tests/testing/avx_vnni.h"
#include "tests/testing/random_weights.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matvec_legacy_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATVEC_LEGACY_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATVEC_LEGACY_TEST_HELPERS_
namespace kvedge {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;

// The types on the int8-activation kernels, from the table.
std::vector<WeightType> Int8Types() { return TypesWithKernel(WeightKernel::kInt8); }

// N(0, 1) activations with, when long enough, a zero block, an outlier and a
// block of .5 ties (x·(1/dx) on the rounding midpoints: dx = 127/127).
std::vector<float> RandomVector(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  if (n >= 4 * kQuantBlock) {
    std::fill(v.begin() + kQuantBlock, v.begin() + 2 * kQuantBlock, 0.0f);
    v[2 * kQuantBlock + 5] = 40.0f;
    for (int j = 0; j < kQuantBlock; ++j) v[3 * kQuantBlock + j] = static_cast<float>(j - 16) + 0.5f;
    v[3 * kQuantBlock] = -127.0f;
  }
  return v;
}

// Column counts: 1, 3 and 9 blocks (odd: a pair alone on AVX-512), and past
// the activation chunks (128 blocks in the row layout, 192 in the interleaved
// one) with an odd tail so sums cross chunks.
const size_t kCols[] = {32, 96, 288, 4096 + 32, 8192 + 96};

// |y − model| for row r, and the bounds: f32 evaluation of the integer
// model, (nb + 24)·2u·Σ_b dx·(|dw|·Σ|qw·qx| + |m|·|Σqx|); the activation
// rounding against the f32 product, Σ_b (dx/2)·Σ|w|; the f32 roundings of
// the table's dequantized weights, 2u·Σ|w·x|.
struct Bounds {
  double model = 0.0, activation = 0.0, dequant = 0.0;
};

Bounds RowBounds(const MatrixView& w, size_t r, const float* x, const std::vector<int16_t>& q,
                 const std::vector<float>& dx) {
  Bounds b;
  const size_t nb = w.cols / kQuantBlock;
  double terms = 0.0;
  for (size_t k = 0; k < nb; ++k) {
    double codes = 0.0, wabs = 0.0;
    int32_t qsum = 0;
    float d = 0.0f, m = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      const size_t c = k * kQuantBlock + j;
      const int qw = ref::QuantCode(w, r, c, &d, &m);
      codes += std::fabs(static_cast<double>(qw) * q[c]);
      qsum += q[c];
      const double wj = ref::DequantizeWeight(w, r, c);
      wabs += std::fabs(wj);
      b.dequant += 2 * kUnitRoundoff * std::fabs(wj * x[c]);
    }
    terms += dx[k] * (std::fabs(d) * codes + std::fabs(m) * std::abs(qsum));
    b.activation += 0.5 * dx[k] * wabs;
  }
  b.model = static_cast<double>(nb + 24) * 2 * kUnitRoundoff * terms + 1e-30;
  return b;
}

const char* LayoutName(const MatrixView& m) { return m.layout == WeightLayout::kRows ? "rows" : "interleaved16"; }

// MatVec vs the integer model and the f32 product, with the bounds above.
void ExpectNearModelOneLayout(const MatrixView& w, const std::vector<float>& x) {
  const size_t rows = w.rows, cols = w.cols;
  std::vector<float> y(rows), model(rows), exact(rows), dx(cols / kQuantBlock);
  std::vector<int16_t> q(cols);
  MatVec(w, x.data(), y.data(), nullptr);
  ref::MatVecRowsQuantizedActivations(w, x.data(), model.data(), 0, rows);
  ref::MatVecRows(w, x.data(), exact.data(), 0, rows);
  ref::QuantizeActivations(x.data(), cols, q.data(), dx.data());
  for (size_t r = 0; r < rows; ++r) {
    const Bounds b = RowBounds(w, r, x.data(), q, dx);
    ASSERT_LE(std::fabs(y[r] - model[r]), b.model)
        << WeightTypeName(w.type) << " " << LayoutName(w) << " " << rows << "x" << cols << " r=" << r
        << " vs int model";
    ASSERT_LE(std::fabs(y[r] - exact[r]), 1.01 * b.activation + b.model + b.dequant)
        << WeightTypeName(w.type) << " " << LayoutName(w) << " " << rows << "x" << cols << " r=" << r << " vs f32";
  }
}

// ExpectNearModelOneLayout on w (kRows) and on its kInterleaved16 copy.
void ExpectNearModel(const MatrixView& w, const std::vector<float>& x) {
  ASSERT_NO_FATAL_FAILURE(ExpectNearModelOneLayout(w, x));
  ASSERT_TRUE(IsInterleavable(w.type)) << WeightTypeName(w.type);
  const TestMatrix il = InterleavedCopy(w);
  ASSERT_NO_FATAL_FAILURE(ExpectNearModelOneLayout(il.view, x));
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MATVEC_LEGACY_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

// Random blocks, odd row and block counts, chunk crossings.
void TestLegacyIntVsModel() {
  std::mt19937 rng(61);
  for (WeightType t : Int8Types()) {
    for (size_t cols : kCols) {
      for (size_t rows : {1u, 3u, 17u}) {
        if (cols > 4096 && rows > 3) continue;  // reference cost; rows are independent
        const TestMatrix m = RandomMatrix(t, rows, cols, rng);
        ASSERT_NO_FATAL_FAILURE(ExpectNearModel(m.view, RandomVector(cols, rng)));
      }
    }
  }
}

// Extreme blocks: every code at its minimum or maximum (qs 0x00 / 0xFF, qh
// all clear / all set: IQ4_NL −127 / 113; Q8_0 also 0x80 / 0x7F: −128 / 127),
// f16 scales and mins at ±65504, the smallest subnormal, ±0; activations all
// equal (every code 127: the largest int16 pair sums of the vpmaddubsw
// paths) or alternating ±1 (Σq = 0: the min term vanishes).
void TestLegacyIntExtremeBlocks() {
  const uint16_t halves[] = {0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x0000, 0x8000, 0x3C00};
  const uint8_t fill[] = {0x00, 0xFF, 0x0F, 0xF0, 0x80, 0x7F};
  for (WeightType t : Int8Types()) {
    const WeightFormat& f = GetWeightFormat(t);
    const size_t rows = std::size(halves) * std::size(fill), nb = 5, cols = nb * kQuantBlock;
    std::vector<uint8_t> bytes(rows * WeightRowBytes(t, cols));
    const std::vector<size_t> fields = HalfFields(t);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t b = 0; b < nb; ++b) {
        uint8_t* blk = bytes.data() + (r * nb + b) * f.block_bytes;
        std::fill(blk, blk + f.block_bytes, fill[r % std::size(fill)]);
        const uint16_t d = halves[(r / std::size(fill) + b) % std::size(halves)];
        const uint16_t m = halves[(r + 3 * b) % std::size(halves)];
        std::memcpy(blk + fields[0], &d, 2);
        if (fields.size() > 1) std::memcpy(blk + fields[1], &m, 2);
      }
    }
    const MatrixView w{t, bytes.data(), rows, cols};
    std::vector<float> x(cols, 1.0f);
    ASSERT_NO_FATAL_FAILURE(ExpectNearModel(w, x));
    for (size_t c = 0; c < cols; ++c) x[c] = c % 2 ? -1.0f : 1.0f;
    ASSERT_NO_FATAL_FAILURE(ExpectNearModel(w, x));
  }
}

// MatMul (tiles of 4 and 8 vectors and their tails) and multi-threaded
// MatVec equal single-threaded MatVec bit for bit, in both layouts (each
// against its own MatVec: the layouts sum in different orders); on AVX2
// with AVX-VNNI (the interleaved Q4_0/Q4_1 tiles' vpdpbusd, on by default
// where the CPU has it) also with it turned off.
void ExpectLegacyMatMulEqualsMatVec(uint32_t seed) {
  ExpectMatMulEqualsMatVecForTypes(Int8Types(), {96, 4096 + 32}, seed, RandomVector);
  std::mt19937 rng(seed);
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(3).value();
  for (WeightType t : Int8Types()) {
    // 193 blocks: past the interleaved kernels' 192-block activation chunk.
    for (size_t cols : {96u, 4096u + 32u, 6144u + 32u}) {
      const TestMatrix il = InterleavedCopy(RandomMatrix(t, 37, cols, rng).view);
      for (size_t n : {2u, 4u, 5u, 9u}) {
        ASSERT_NO_FATAL_FAILURE(ExpectMatMulEqualsMatVec(il.view, RandomVector(n * cols, rng), n, arena.get()));
      }
    }
  }
}
void TestLegacyIntMatMulAndThreads() {
  ExpectLegacyMatMulEqualsMatVec(67);
  if (HWY_TARGET == HWY_AVX2 && CpuHasAvxVnni()) WithoutAvxVnni([] { ExpectLegacyMatMulEqualsMatVec(68); });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_BEFORE_TEST(LegacyIntKernelsTest);
HWY_EXPORT_AND_TEST_P(LegacyIntKernelsTest, TestLegacyIntVsModel);
HWY_EXPORT_AND_TEST_P(LegacyIntKernelsTest, TestLegacyIntExtremeBlocks);
HWY_EXPORT_AND_TEST_P(LegacyIntKernelsTest, TestLegacyIntMatMulAndThreads);

}  // namespace kvedge
#endif  // HWY_ONCE
