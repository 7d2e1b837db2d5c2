// Model kernels vs their scalar references, once per compiled Highway target
// (the test fixture restricts dispatch to that target), plus the reference
// quantizers and the exact Q8_0/Q4_0 block layouts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "platform/thread_arena.h"
#include "simd/kv_format.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_quant.h"
#include "tests/testing/test_scale.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/model_kernels_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

// Target-independent helpers, compiled once.
#ifndef KVEDGE_TESTS_SIMD_MODEL_KERNELS_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MODEL_KERNELS_TEST_HELPERS_
namespace kvedge {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;  // f32 rounding error bound, relative
constexpr WeightType kAllTypes[] = {WeightType::kF32,  WeightType::kF16,  WeightType::kBF16,
                                    WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1,
                                    WeightType::kQ5_0, WeightType::kQ5_1, WeightType::kIQ4_NL};

// A [rows][cols] matrix in one of the weight formats, owning its bytes.
struct TestMatrix {
  std::vector<uint64_t> storage;  // raw bytes (view.data 64-byte aligned inside)
  MatrixView view;
};

const char* LayoutName(const MatrixView& m) {
  return m.layout == WeightLayout::kRows ? "rows" : "interleaved16";
}

// Copy of a row-major legacy 32-block matrix in the kInterleaved16 layout.
TestMatrix Interleaved(const MatrixView& src) {
  TestMatrix m;
  const size_t bytes = MatrixBytes(src.type, WeightLayout::kInterleaved16, src.rows, src.cols);
  m.storage.assign(bytes / 8 + 8, 0);
  auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m.storage.data()) + 63) & ~uintptr_t{63});
  InterleaveGroups(src, 0, InterleavedGroups(src.rows), base);
  m.view = InterleavedView(src, base);
  return m;
}

// The matrix as given and, for the legacy 32-blocks, its interleaved copy (owned by
// *keep): every kernel test runs on both layouts.
std::vector<MatrixView> Layouts(const MatrixView& m, TestMatrix* keep) {
  std::vector<MatrixView> views = {m};
  if (IsInterleavable(m.type)) {
    *keep = Interleaved(m);
    views.push_back(keep->view);
  }
  return views;
}

std::vector<float> RandomVector(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

TestMatrix MakeMatrix(WeightType type, size_t rows, size_t cols, std::mt19937& rng) {
  const std::vector<float> w = RandomVector(rows * cols, rng, 0.05f);
  const size_t row_bytes = WeightRowBytes(type, cols);
  TestMatrix m;
  m.storage.assign((rows * row_bytes + 7) / 8 + 1, 0);
  uint8_t* base = reinterpret_cast<uint8_t*>(m.storage.data());
  for (size_t r = 0; r < rows; ++r) {
    const float* src = w.data() + r * cols;
    uint8_t* dst = base + r * row_bytes;
    GetWeightFormat(type).quantize(src, dst, cols);
  }
  m.view = MatrixView{type, base, rows, cols};
  return m;
}

// Σ_c |W[r][c]·x[c]|: scale of the rounding error of any f32 evaluation.
double AbsDot(const MatrixView& w, size_t r, const float* x) {
  double s = 0.0;
  for (size_t c = 0; c < w.cols; ++c) s += std::fabs(static_cast<double>(ref::DequantizeWeight(w, r, c)) * x[c]);
  return s;
}

// Column counts for a format: odd sizes for float formats, 32-multiples up to
// 5 × lanes × 32 (every block count to 8, then every 3rd; every 7th under
// QuickRun()) plus sizes crossing the 4096-column activation chunk for the
// quantized ones.
std::vector<size_t> ColsFor(WeightType t, size_t lanes) {
  std::vector<size_t> cols;
  if (IsQuantizedWeight(t)) {
    const size_t step = QuickRun() ? 7 : 3;
    for (size_t k = 1; k <= 5 * lanes; k += (k < 8 ? 1 : step)) cols.push_back(32 * k);
    cols.push_back(4096);
    cols.push_back(4096 + 96);
    cols.push_back(8192 + 32);
  } else {
    for (size_t c = 1; c <= 5 * lanes + 1; c += (c < 20 ? 1 : 7)) cols.push_back(c);
    for (size_t c : {63u, 65u, 257u, 1001u, 2049u}) cols.push_back(c);
  }
  return cols;
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MODEL_KERNELS_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

size_t FloatLanes() { return hn::Lanes(hn::ScalableTag<float>()); }

// The fixture restricts dispatch to the target under test, so the library's
// HWY_DYNAMIC_DISPATCH runs exactly this target's kernels.
void TestDispatchIsThisTarget() { EXPECT_EQ(hwy::SupportedTargets(), static_cast<int64_t>(HWY_TARGET)); }

// Q8_0/Q4_0 blocks with known bytes decode to known weights, in the reference
// and in the SIMD kernels (x = 127·e_k makes the int path exact: activation
// scale 1, code 127, so y[r] = 127·W[r][k] with one rounding).
void TestKnownBlocks() {
  // f16 scales: 1, −0.5, 65504 (max), 2^-24 (smallest subnormal), 2^-15 (subnormal).
  const uint16_t scales[] = {0x3C00, 0xB800, 0x7BFF, 0x0001, 0x0200};
  const float scale_values[] = {1.0f, -0.5f, 65504.0f, 0x1.0p-24f, 0x1.0p-15f};
  constexpr size_t kBlocks = 5;
  BlockQ8_0 q8[kBlocks];
  BlockQ4_0 q4[kBlocks];
  for (size_t b = 0; b < kBlocks; ++b) {
    q8[b].d = scales[b];
    q4[b].d = scales[b];
    for (int j = 0; j < kQuantBlock; ++j) q8[b].qs[j] = static_cast<int8_t>(j * 8 - 128 + static_cast<int>(b));
    for (int j = 0; j < kQuantBlock / 2; ++j) q4[b].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  const MatrixView m8{WeightType::kQ8_0, q8, 1, kBlocks * kQuantBlock};
  const MatrixView m4{WeightType::kQ4_0, q4, 1, kBlocks * kQuantBlock};
  std::vector<float> x(kBlocks * kQuantBlock, 0.0f);
  for (size_t c = 0; c < kBlocks * kQuantBlock; ++c) {
    const size_t b = c / kQuantBlock;
    const int j = static_cast<int>(c % kQuantBlock);
    const float w8 = scale_values[b] * static_cast<float>(j * 8 - 128 + static_cast<int>(b));
    const float w4 = scale_values[b] * static_cast<float>(j < 16 ? j - 8 : (15 - (j - 16)) - 8);
    ASSERT_EQ(ref::DequantizeWeight(m8, 0, c), w8) << c;
    ASSERT_EQ(ref::DequantizeWeight(m4, 0, c), w4) << c;
    x[c] = 127.0f;
    TestMatrix keep8, keep4;
    for (const MatrixView& m : Layouts(m8, &keep8)) {
      float y8 = 0.0f;
      MatVec(m, x.data(), &y8, nullptr);
      EXPECT_EQ(y8, 127.0f * w8) << LayoutName(m) << " " << c;
    }
    for (const MatrixView& m : Layouts(m4, &keep4)) {
      float y4 = 0.0f;
      MatVec(m, x.data(), &y4, nullptr);
      EXPECT_EQ(y4, 127.0f * w4) << LayoutName(m) << " " << c;
    }
    x[c] = 0.0f;
  }
}

// Every finite f16 block scale (stride 3 through the bit patterns, 21 under
// QuickRun(); both signs, every exponent, normals and subnormals) is
// converted exactly, at every block position of a 64-block row (whole vector
// groups of scales and the scalar tail), for Q8_0, Q4_0 and Q4_1, on both
// layouts, in MatVec and MatMul. Row r has one nonzero code, at column 0 of
// block r mod 64 (Q4_0: code 9 → weight 1), and x = 127 at column 0 of every
// block, so y[r] = 127·d exactly. Q4_1's f16 min m (its own conversion in
// every kernel) likewise: d = 0, m = the pattern in block r mod 64 and 0
// elsewhere, so y[r] = m·dx·Σq = 127·m exactly.
void TestBlockScalesAllHalves() {
  constexpr size_t kBlocks = 64, kRows = 64, kCols = kBlocks * kQuantBlock;
  std::vector<uint16_t> patterns;
  const uint32_t stride = QuickRun() ? 21 : 3;
  for (uint32_t h = 0; h < 0x10000; h += stride) {
    if ((h & 0x7C00) != 0x7C00) patterns.push_back(static_cast<uint16_t>(h));  // skip inf/nan
  }
  std::vector<BlockQ8_0> q8(kRows * kBlocks);
  std::vector<BlockQ4_0> q4(kRows * kBlocks);
  std::vector<BlockQ4_1> q41(kRows * kBlocks);
  std::vector<float> x(kCols, 0.0f), y(kRows), y2(2 * kRows);
  for (size_t b = 0; b < kBlocks; ++b) x[b * kQuantBlock] = 127.0f;
  std::vector<float> x2(2 * kCols);
  std::copy(x.begin(), x.end(), x2.begin());
  std::copy(x.begin(), x.end(), x2.begin() + kCols);
  for (size_t base = 0; base < patterns.size(); base += kRows) {
    for (size_t r = 0; r < kRows; ++r) {
      for (size_t b = 0; b < kBlocks; ++b) {
        // Other blocks get finite scales too (their codes are 0).
        const uint16_t h = patterns[(base + r + 17 * b) % patterns.size()];
        BlockQ8_0& b8 = q8[r * kBlocks + b];
        BlockQ4_0& b4 = q4[r * kBlocks + b];
        BlockQ4_1& b41 = q41[r * kBlocks + b];
        b8.d = b4.d = h;
        b41.d = 0;
        b41.m = b == r % kBlocks ? h : 0;
        std::fill(b8.qs, b8.qs + kQuantBlock, 0);
        std::fill(b4.qs, b4.qs + kQuantBlock / 2, 0x88);
        std::fill(b41.qs, b41.qs + kQuantBlock / 2, 0x5A);  // any codes: d = 0
        if (b == r % kBlocks) {
          b8.qs[0] = 1;
          b4.qs[0] = 0x89;
        }
      }
    }
    TestMatrix keep8, keep4, keep41;
    std::vector<MatrixView> views = Layouts(MatrixView{WeightType::kQ8_0, q8.data(), kRows, kCols}, &keep8);
    for (const MatrixView& m4 : Layouts(MatrixView{WeightType::kQ4_0, q4.data(), kRows, kCols}, &keep4)) {
      views.push_back(m4);
    }
    for (const MatrixView& m41 : Layouts(MatrixView{WeightType::kQ4_1, q41.data(), kRows, kCols}, &keep41)) {
      views.push_back(m41);
    }
    for (const MatrixView& m : views) {
      MatVec(m, x.data(), y.data(), nullptr);
      MatMul(m, x2.data(), 2, y2.data(), nullptr);
      for (size_t r = 0; r < kRows; ++r) {
        const uint16_t h = patterns[(base + r + 17 * (r % kBlocks)) % patterns.size()];
        const float want = 127.0f * F32FromF16(h);
        ASSERT_EQ(y[r], want) << WeightTypeName(m.type) << " " << LayoutName(m) << " h=" << h << " r=" << r;
        ASSERT_EQ(y2[r], want) << WeightTypeName(m.type) << " " << LayoutName(m) << " h=" << h << " r=" << r;
        ASSERT_EQ(y2[kRows + r], want) << WeightTypeName(m.type) << " " << LayoutName(m) << " h=" << h << " r=" << r;
      }
    }
  }
}

// Unit-vector probes: every column of every format is decoded bit-exactly
// (f32/f16/bf16: y = W[:,k]; quantized: y = 127·W[:,k] as above).
void TestColumnProbe() {
  std::mt19937 rng(7);
  for (WeightType t : kAllTypes) {
    const size_t cols = IsQuantizedWeight(t) ? 32 * (2 * FloatLanes() + 1) : 3 * FloatLanes() + 5;
    const size_t rows = 9;
    const TestMatrix base = MakeMatrix(t, rows, cols, rng);
    const float probe = IsQuantizedWeight(t) ? 127.0f : 1.0f;
    std::vector<float> x(cols, 0.0f), y(rows);
    TestMatrix keep;
    for (const MatrixView& m : Layouts(base.view, &keep)) {
      for (size_t k = 0; k < cols; ++k) {
        x[k] = probe;
        MatVec(m, x.data(), y.data(), nullptr);
        for (size_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[r], probe * ref::DequantizeWeight(base.view, r, k))
              << WeightTypeName(t) << " " << LayoutName(m) << " r=" << r << " k=" << k;
        }
        x[k] = 0.0f;
      }
    }
  }
}

// Float formats: |y − ref| ≤ γ·Σ|w·x| with γ = (cols/N + N + 8)·u, the f32
// error bound of N-lane accumulation + horizontal sum + scalar tail.
// Quantized formats: (a) against the exact int-path model, f32 rounding of nb
// block terms: (nb + 24)·2u·Σ_b|dw·dx·Σ qw·qx|; (b) against the f32 product,
// the activation rounding bound Σ_b (dx_b/2)·Σ_j|w_j| (1% slack) plus (a).
void TestMatVecVsReference() {
  std::mt19937 rng(11);
  const size_t lanes = FloatLanes();
  for (WeightType t : kAllTypes) {
    for (size_t cols : ColsFor(t, lanes)) {
      for (size_t rows : {1u, 3u, 17u, 64u}) {
        // The reference's cost: rows are independent, long rows take 1 and 3 (from 4096 columns under QuickRun()).
        if ((cols > 4096 || (cols == 4096 && QuickRun())) && rows > 3) continue;
        const TestMatrix base = MakeMatrix(t, rows, cols, rng);
        TestMatrix keep;
        for (const MatrixView& view : Layouts(base.view, &keep)) {
          const std::vector<float> x = RandomVector(cols, rng);
          std::vector<float> y(rows), want(rows);
          MatVec(view, x.data(), y.data(), nullptr);
          ref::MatVecRows(view, x.data(), want.data(), 0, rows);
          if (!IsQuantizedWeight(t)) {
            const double gamma = static_cast<double>(cols / lanes + lanes + 8) * kUnitRoundoff;
            for (size_t r = 0; r < rows; ++r) {
              ASSERT_LE(std::fabs(y[r] - want[r]), gamma * AbsDot(view, r, x.data()) + 1e-30)
                  << WeightTypeName(t) << " " << LayoutName(view) << " " << rows << "x" << cols << " r=" << r;
            }
            continue;
          }
          const size_t nb = cols / kQuantBlock;
          std::vector<int16_t> q(cols);
          std::vector<float> dx(nb), model(rows);
          ref::QuantizeActivations(x.data(), cols, q.data(), dx.data());
          ref::MatVecRowsQuantizedActivations(view, x.data(), model.data(), 0, rows);
          for (size_t r = 0; r < rows; ++r) {
            double terms = 0.0, act_bound = 0.0;
            for (size_t b = 0; b < nb; ++b) {
              double wq = 0.0, wabs = 0.0;
              for (int j = 0; j < kQuantBlock; ++j) {
                const double wj = ref::DequantizeWeight(view, r, b * kQuantBlock + j);
                wq += std::fabs(wj * q[b * kQuantBlock + j]);
                wabs += std::fabs(wj);
              }
              terms += wq * dx[b];
              act_bound += 0.5 * dx[b] * wabs;
            }
            const double f32_bound = static_cast<double>(nb + 24) * 2 * kUnitRoundoff * terms + 1e-30;
            ASSERT_LE(std::fabs(y[r] - model[r]), f32_bound)
                << WeightTypeName(t) << " " << LayoutName(view) << " " << rows << "x" << cols << " r=" << r << " vs int model";
            ASSERT_LE(std::fabs(y[r] - want[r]), 1.01 * act_bound + f32_bound)
                << WeightTypeName(t) << " " << LayoutName(view) << " " << rows << "x" << cols << " r=" << r << " vs f32";
          }
        }
      }
    }
  }
}

// Typical accuracy of the int8-activation path on TinyLlama-like shapes with
// Gaussian activations: relative RMS error over rows, printed for the docs
// and bounded (llama.cpp's Q8_0-activation path is in the same range).
void TestQuantizedPathAccuracy() {
  std::mt19937 rng(5);
  for (WeightType t : {WeightType::kQ8_0, WeightType::kQ4_0}) {
    for (size_t cols : {2048u, 5632u}) {
      const size_t rows = 64;
      const TestMatrix base = MakeMatrix(t, rows, cols, rng);
      TestMatrix keep;
      for (const MatrixView& view : Layouts(base.view, &keep)) {
        const std::vector<float> x = RandomVector(cols, rng);
        std::vector<float> y(rows), want(rows);
        MatVec(view, x.data(), y.data(), nullptr);
        ref::MatVecRows(view, x.data(), want.data(), 0, rows);
        double err2 = 0.0, ref2 = 0.0, max_rel = 0.0;
        for (size_t r = 0; r < rows; ++r) {
          err2 += (y[r] - want[r]) * static_cast<double>(y[r] - want[r]);
          ref2 += want[r] * static_cast<double>(want[r]);
          max_rel = std::max(max_rel, std::fabs(y[r] - want[r]) / AbsDot(view, r, x.data()));
        }
        const double rel_rms = std::sqrt(err2 / ref2);
        if (HWY_TARGET == HWY_STATIC_TARGET) {
          std::printf("int8-activation path %s %s cols=%zu: relative RMS error %.2e, max |err|/sum|w*x| %.2e\n",
                      WeightTypeName(t), LayoutName(view), cols, rel_rms, max_rel);
        }
        EXPECT_LT(rel_rms, 1e-2) << WeightTypeName(t) << " cols=" << cols;
      }
    }
  }
}

// Results do not depend on the thread count: rows are independent and each
// row's op sequence is fixed.
void TestMatVecThreads() {
  std::mt19937 rng(13);
  std::unique_ptr<ThreadArena> arenas[3];
  for (int i = 0; i < 3; ++i) arenas[i] = ThreadArena::Create(i + 1).value();
  for (WeightType t : kAllTypes) {
    const size_t cols = IsQuantizedWeight(t) ? 4096 + 64 : 1000 + 3;
    for (size_t rows : {1u, 3u, 17u, 130u}) {
      const TestMatrix base = MakeMatrix(t, rows, cols, rng);
      TestMatrix keep;
      for (const MatrixView& view : Layouts(base.view, &keep)) {
        const std::vector<float> x = RandomVector(cols, rng);
        std::vector<float> y0(rows), y(rows);
        MatVec(view, x.data(), y0.data(), nullptr);
        for (auto& arena : arenas) {
          std::fill(y.begin(), y.end(), -1.0f);
          MatVec(view, x.data(), y.data(), arena.get());
          for (size_t r = 0; r < rows; ++r) {
            ASSERT_EQ(y[r], y0[r]) << WeightTypeName(t) << " threads=" << arena->num_threads() << " r=" << r;
          }
        }
      }
    }
  }
}

// MatMul of n vectors equals n MatVecs bit for bit (tile of 8, groups of 4
// and their tails), single- and multi-threaded.
void TestMatMulEqualsMatVecs() {
  std::mt19937 rng(17);
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(2).value();
  for (WeightType t : kAllTypes) {
    for (size_t cols : IsQuantizedWeight(t) ? std::vector<size_t>{64, 4096 + 32} : std::vector<size_t>{37, 515}) {
      const size_t rows = 19;
      const TestMatrix base = MakeMatrix(t, rows, cols, rng);
      TestMatrix keep;
      for (const MatrixView& view : Layouts(base.view, &keep)) {
        for (size_t n : {1u, 2u, 3u, 4u, 5u, 8u, 9u, 13u, 17u}) {
          const std::vector<float> x = RandomVector(n * cols, rng);  // [n][cols]
          std::vector<float> want(n * rows), y(n * rows);              // [n][rows]
          for (size_t v = 0; v < n; ++v) MatVec(view, x.data() + v * cols, want.data() + v * rows, nullptr);
          for (ThreadArena* a : {static_cast<ThreadArena*>(nullptr), arena.get()}) {
            std::fill(y.begin(), y.end(), -1.0f);
            MatMul(view, x.data(), n, y.data(), a);
            for (size_t i = 0; i < n * rows; ++i) {
              ASSERT_EQ(y[i], want[i]) << WeightTypeName(t) << " cols=" << cols << " n=" << n << " i=" << i;
            }
          }
        }
      }
    }
  }
}

// Vector ops at lengths 1 … 5·lanes (+ odd offsets for misalignment).
void TestVectorOps() {
  std::mt19937 rng(19);
  const size_t lanes = FloatLanes();
  for (size_t n = 1; n <= 5 * lanes + 3; ++n) {
    for (size_t offset : {0u, 1u}) {
      const std::vector<float> a_buf = RandomVector(n + offset, rng, 3.0f);
      const std::vector<float> b_buf = RandomVector(n + offset, rng);
      const float* a = a_buf.data() + offset;
      const float* b = b_buf.data() + offset;
      std::vector<float> out(n), want(n);

      // RmsNorm: relative (n/N + N + 16)·u (sum of squares, sqrt, two products).
      const double rms_tol = static_cast<double>(n / lanes + lanes + 16) * kUnitRoundoff;
      RmsNorm(a, b, n, 1e-5f, out.data());
      ref::RmsNorm(a, b, n, 1e-5f, want.data());
      for (size_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(out[i] - want[i]), rms_tol * std::fabs(want[i])) << n;
      std::vector<float> inplace(a, a + n);  // out aliasing x
      RmsNorm(inplace.data(), b, n, 1e-5f, inplace.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(inplace[i], out[i]) << n;

      // SwiGlu: relative 2e-6 (Exp ≤ 1 ulp, then add, divide, multiply).
      SwiGlu(a, b, n, out.data());
      ref::SwiGlu(a, b, n, want.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(out[i] - want[i]), 2e-6 * std::fabs(want[i]) + 1e-37) << n << " g=" << a[i];
      }
      std::vector<float> gate(a, a + n);  // out aliasing gate
      SwiGlu(gate.data(), b, n, gate.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(gate[i], out[i]) << n;

      // GeluTanhMul: Tanh ≤ 4 ulp, and the rounding of g³ inside it, give an
      // absolute error ≲ 1e-6·|g·u|; the products add relative 4 ulp.
      GeluTanhMul(a, b, n, out.data());
      ref::GeluTanhMul(a, b, n, want.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(out[i] - want[i]), 2e-6 * std::fabs(a[i] * b[i]) + 1e-37) << n << " g=" << a[i];
      }
      std::vector<float> up(b, b + n);  // out aliasing up
      GeluTanhMul(a, up.data(), n, up.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(up[i], out[i]) << n;

      // SoftCap: relative 1e-6 (Tanh ≤ 4 ulp, a divide and a multiply).
      for (float cap : {0.5f, 50.0f}) {
        SoftCap(a, n, cap, out.data());
        ref::SoftCap(a, n, cap, want.data());
        for (size_t i = 0; i < n; ++i) {
          ASSERT_LE(std::fabs(out[i] - want[i]), 1e-6 * std::fabs(want[i]) + 1e-37) << n << " x=" << a[i];
          ASSERT_LE(std::fabs(out[i]), cap);
        }
      }

      // AddInPlace: exact (one f32 add per element either way).
      std::vector<float> acc(a, a + n);
      AddInPlace(acc.data(), b, n);
      std::vector<float> acc_ref(a, a + n);
      ref::AddInPlace(acc_ref.data(), b, n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], acc_ref[i]) << n;

      // DotF32: (n/N + N + 8)·u·Σ|a·b|.
      double abs_dot = 0.0;
      for (size_t i = 0; i < n; ++i) abs_dot += std::fabs(static_cast<double>(a[i]) * b[i]);
      const double dot_tol = static_cast<double>(n / lanes + lanes + 8) * kUnitRoundoff * abs_dot;
      ASSERT_LE(std::fabs(DotF32(a, b, n) - ref::DotF32(a, b, n)), dot_tol) << n;
    }
  }
  // SwiGlu saturates cleanly far outside Exp's range.
  const float gate[3] = {-200.0f, 200.0f, 0.0f};
  const float up[3] = {1.0f, 2.0f, 5.0f};
  float out[3];
  SwiGlu(gate, up, 3, out);
  EXPECT_LE(std::fabs(out[0]), 1e-35f);  // −200·e^−88 / (1 + …) ≈ −1.2e−36
  EXPECT_EQ(out[1], 400.0f);
  EXPECT_EQ(out[2], 0.0f);
  // GELU saturates to 0 and to the identity; soft-capping to ±cap.
  const float g2[3] = {-200.0f, 200.0f, 1.0f};
  GeluTanhMul(g2, up, 3, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 400.0f);
  EXPECT_NEAR(out[2], 5.0f * 0.841192f, 1e-5f);  // gelu_tanh(1) = 0.8411920
  const float big[2] = {1e30f, -1e30f};
  SoftCap(big, 2, 30.0f, out);
  EXPECT_EQ(out[0], 30.0f);
  EXPECT_EQ(out[1], -30.0f);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_BEFORE_TEST(ModelKernelsTest);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestDispatchIsThisTarget);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestKnownBlocks);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestColumnProbe);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestBlockScalesAllHalves);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestMatVecVsReference);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestQuantizedPathAccuracy);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestMatVecThreads);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestMatMulEqualsMatVecs);
HWY_EXPORT_AND_TEST_P(ModelKernelsTest, TestVectorOps);

namespace {

// ggml's algorithms on blocks whose codes are known by hand.
TEST(WeightQuantTest, KnownBlocks) {
  float x[kQuantBlock];
  for (int j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j - 8);        // −8 … 7: max |x| is −8, so d = 1
    x[j + 16] = static_cast<float>(7 - j);   // 7 … −8
  }
  BlockQ4_0 q4;
  QuantizeRowQ4_0(x, kQuantBlock, &q4);
  EXPECT_EQ(q4.d, 0x3C00);  // f16 1.0
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q4.qs[j], j | ((15 - j) << 4)) << j;
  // Positive extreme: d = −1, and +8 maps to code 0 exactly.
  x[0] = 8.0f;
  QuantizeRowQ4_0(x, kQuantBlock, &q4);
  EXPECT_EQ(q4.d, 0xBC00);  // f16 −1.0
  EXPECT_EQ(q4.qs[0] & 15, 0);

  for (int j = 0; j < kQuantBlock; ++j) x[j] = static_cast<float>(j * 8 - 127);  // amax 127 → d = 1
  BlockQ8_0 q8;
  QuantizeRowQ8_0(x, kQuantBlock, &q8);
  EXPECT_EQ(q8.d, 0x3C00);
  for (int j = 0; j < kQuantBlock; ++j) EXPECT_EQ(q8.qs[j], j * 8 - 127) << j;
  x[0] = -126.5f;  // roundf: ties away from zero, as ggml
  x[1] = 0.5f;
  QuantizeRowQ8_0(x, kQuantBlock, &q8);
  EXPECT_EQ(q8.qs[0], -127);
  EXPECT_EQ(q8.qs[1], 1);

  std::fill(x, x + kQuantBlock, 0.0f);  // all-zero block: d = ±0, codes 0 / 8
  QuantizeRowQ8_0(x, kQuantBlock, &q8);
  QuantizeRowQ4_0(x, kQuantBlock, &q4);
  EXPECT_EQ(q8.d, 0);
  EXPECT_EQ(q4.d, 0x8000);  // 0 / −8 = −0, as ggml writes it
  for (int j = 0; j < kQuantBlock; ++j) EXPECT_EQ(q8.qs[j], 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q4.qs[j], 0x88);
}

// Round trip: Q8_0 |x − w| ≤ d/2 + 127·|d − f16(d)|; Q4_0 the same with
// |d|/2 + 8·|d − f16(d)| except the clamped top code (≤ |d| + …);
// f16 ≤ 2^-11·|x| and bf16 ≤ 2^-8·|x| for normal values.
TEST(WeightQuantTest, RoundTripBounds) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  constexpr size_t kN = 32 * 256;
  std::vector<float> x(kN);
  for (float& f : x) f = dist(rng);
  std::vector<BlockQ8_0> q8(kN / kQuantBlock);
  std::vector<BlockQ4_0> q4(kN / kQuantBlock);
  std::vector<uint16_t> f16(kN), bf16(kN);
  QuantizeRowQ8_0(x.data(), kN, q8.data());
  QuantizeRowQ4_0(x.data(), kN, q4.data());
  QuantizeRowF16(x.data(), kN, f16.data());
  QuantizeRowBF16(x.data(), kN, bf16.data());
  const MatrixView m8{WeightType::kQ8_0, q8.data(), 1, kN};
  const MatrixView m4{WeightType::kQ4_0, q4.data(), 1, kN};
  for (size_t b = 0; b < kN / kQuantBlock; ++b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      const float v = x[b * kQuantBlock + j];
      if (std::fabs(v) > amax) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const double d8 = amax / 127.0f;
    const double d4 = std::fabs(max / -8.0f);
    const double e8 = std::fabs(d8 - F32FromF16(q8[b].d));
    const double e4 = std::fabs(d4 - std::fabs(F32FromF16(q4[b].d)));
    for (int j = 0; j < kQuantBlock; ++j) {
      const size_t c = b * kQuantBlock + j;
      ASSERT_LE(std::fabs(x[c] - ref::DequantizeWeight(m8, 0, c)), 0.5 * d8 + 127 * e8 + 1e-12) << c;
      const int code = j < 16 ? q4[b].qs[j] & 15 : q4[b].qs[j - 16] >> 4;
      const double bound4 = (code == 15 ? d4 : 0.5 * d4) + 8 * e4 + 1e-12;
      ASSERT_LE(std::fabs(x[c] - ref::DequantizeWeight(m4, 0, c)), bound4) << c;
    }
  }
  for (size_t i = 0; i < kN; ++i) {
    if (std::fabs(x[i]) < 1e-4f) continue;  // f16 subnormal range: absolute error instead
    ASSERT_LE(std::fabs(x[i] - F32FromF16(f16[i])), 0x1.0p-11 * std::fabs(x[i])) << i;
    ASSERT_LE(std::fabs(x[i] - F32FromBF16(bf16[i])), 0x1.0p-8 * std::fabs(x[i])) << i;
  }
}

// Interleaving is lossless: every weight of rows 0…rows−1 reads back the
// same through the reference, padded rows are zero weights, and the sizes
// are those of the layout description (same bytes per weight, 64-byte groups).
TEST(WeightFormatTest, InterleavedLayoutRoundTrip) {
  std::mt19937 rng(23);
  for (WeightType t : {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0,
                       WeightType::kQ5_1, WeightType::kIQ4_NL}) {
    ASSERT_TRUE(IsInterleavable(t));
    for (size_t rows : {1u, 16u, 17u, 40u}) {
      for (size_t cols : {32u, 96u, QuickRun() ? 608u : 4096u + 32u}) {  // odd block counts; shorter under QuickRun()
        const TestMatrix m = MakeMatrix(t, rows, cols, rng);
        const TestMatrix il = Interleaved(m.view);
        const size_t groups = (rows + 15) / 16;
        // A whole pair of blocks of 16 rows takes the bytes of 32 GGUF blocks;
        // an odd last block its 16 rows' bytes plus its partner's scales (and mins).
        const size_t pair_bytes = 32 * GetWeightFormat(t).block_bytes;
        const size_t header = InterleavedHeaderBytes(t);
        EXPECT_EQ(InterleavedGroupBytes(t, cols), (cols / 64) * pair_bytes + (cols / 32) % 2 * (pair_bytes / 2 + header));
        EXPECT_EQ(InterleavedGroupBytes(t, cols) % 64, 0u);
        EXPECT_EQ(MatrixBytes(t, WeightLayout::kInterleaved16, rows, cols), groups * InterleavedGroupBytes(t, cols));
        for (size_t r = 0; r < groups * 16; ++r) {
          for (size_t c = 0; c < cols; ++c) {
            const float want = r < rows ? ref::DequantizeWeight(m.view, r, c) : 0.0f;
            ASSERT_EQ(ref::DequantizeWeight(il.view, r, c), want)
                << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r << " c=" << c;
            if (r >= rows) continue;
            float d0, m0, d1, m1;  // the integer semantics every kernel uses
            ASSERT_EQ(ref::QuantCode(il.view, r, c, &d1, &m1), ref::QuantCode(m.view, r, c, &d0, &m0))
                << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r << " c=" << c;
            ASSERT_EQ(d1, d0);
            ASSERT_EQ(m1, m0);
          }
        }
      }
    }
  }
  EXPECT_EQ(MatrixBytes(WeightType::kQ4_0, WeightLayout::kRows, 3, 64), 3u * 36u);
}

TEST(WeightFormatTest, NamesAndRowBytes) {
  EXPECT_STREQ(WeightTypeName(WeightType::kQ4_0), "q4_0");
  EXPECT_STREQ(WeightTypeName(WeightType::kBF16), "bf16");
  EXPECT_EQ(WeightRowBytes(WeightType::kF32, 7), 28u);
  EXPECT_EQ(WeightRowBytes(WeightType::kF16, 7), 14u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ8_0, 2048), 64u * 34u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ4_0, 2048), 64u * 18u);
}

}  // namespace
}  // namespace kvedge
#endif  // HWY_ONCE
