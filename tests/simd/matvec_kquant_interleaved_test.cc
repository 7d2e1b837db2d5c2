// Q4_K, Q5_K and Q6_K in the interleaved layout (kInterleaved16,
// matvec_kquant_interleaved.cc, matvec_q6k_interleaved.cc):
// the layout round trip, and per compiled Highway target (the fixture
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

#include "platform/target_report.h"
#include "platform/thread_arena.h"
#include "simd/float16.h"
#include "simd/matvec_kquant.h"
#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"
#include "tests/testing/avx_vnni.h"
#include "tests/testing/random_weights.h"
#include "tests/testing/test_scale.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/matvec_kquant_interleaved_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/test_util-inl.h"

#ifndef KVEDGE_TESTS_SIMD_MATVEC_KQUANT_INTERLEAVED_TEST_HELPERS_
#define KVEDGE_TESTS_SIMD_MATVEC_KQUANT_INTERLEAVED_TEST_HELPERS_
namespace kvedge {
namespace {

// The K-quants with an interleaved layout.
const WeightType kILKTypes[] = {WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K};

// Lossless: every super-block reads back to its GGUF bytes, every weight
// dequantizes the same, padded rows are zero weights; the sizes are the
// layout's (16 rows' GGUF bytes per group, Q6_K padded to 64-byte lines
// when a row has an odd number of super-blocks).
TEST(KQuantInterleavedLayoutTest, RoundTrip) {
  std::mt19937 rng(71);
  for (WeightType t : kILKTypes) {
    EXPECT_TRUE(IsInterleavable(t));
    for (size_t rows : {1u, 16u, 17u, 40u}) {
      for (size_t cols : {256u, 768u, 4096u + 256u, 4096u + 512u}) {
        const TestMatrix m = RandomMatrix(t, rows, cols, rng);
        const TestMatrix il = InterleavedCopy(m.view);
        const size_t groups = (rows + 15) / 16, nsb = cols / kSuperBlock;
        const size_t block_bytes = WeightRowBytes(t, kSuperBlock);
        const size_t pad = t == WeightType::kQ6_K && nsb % 2 == 1 ? 32 : 0;
        EXPECT_EQ(InterleavedGroupBytes(t, cols), 16 * WeightRowBytes(t, cols) + pad);
        EXPECT_EQ(InterleavedGroupBytes(t, cols) % 64, 0u);
        EXPECT_EQ(MatrixBytes(t, WeightLayout::kInterleaved16, rows, cols), groups * InterleavedGroupBytes(t, cols));
        for (size_t r = 0; r < groups * 16; ++r) {
          for (size_t s = 0; s < nsb; ++s) {
            std::vector<uint8_t> back(block_bytes), want(block_bytes, 0);
            ReadInterleavedSuperBlock(il.view, r, s, back.data());
            if (r < rows) std::memcpy(want.data(), m.bytes.data() + (r * nsb + s) * block_bytes, block_bytes);
            ASSERT_EQ(back, want) << WeightTypeName(t) << " " << rows << "x" << cols << " r=" << r << " s=" << s;
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

// A re-coding of a block's 128 code bytes and kBits bit bytes (Encode*Codes)
// and its decoding are each other's inverse on random bytes, both ways.
template <size_t kBits>
void ExpectInverseCodecs(void (*encode)(const uint8_t*, const uint8_t*, uint8_t*, uint8_t*),
                         void (*decode)(const uint8_t*, const uint8_t*, uint8_t*, uint8_t*), unsigned seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 100; ++i) {
    uint8_t x[128], y[kBits], a[128], b[kBits], x2[128], y2[kBits];
    for (uint8_t& c : x) c = static_cast<uint8_t>(rng());
    for (uint8_t& c : y) c = static_cast<uint8_t>(rng());
    encode(x, y, a, b);
    decode(a, b, x2, y2);
    ASSERT_EQ(0, std::memcmp(x, x2, sizeof(x)));
    ASSERT_EQ(0, std::memcmp(y, y2, sizeof(y)));
    decode(x, y, a, b);
    encode(a, b, x2, y2);
    ASSERT_EQ(0, std::memcmp(x, x2, sizeof(x)));
    ASSERT_EQ(0, std::memcmp(y, y2, sizeof(y)));
  }
}

// Q5_K's re-coded codes (model_kernels.h): every (qs byte, its two qh
// bits) of every pair decodes to the code GGUF's bits give and encodes
// back; and the two bytes are each other's inverse on random blocks.
TEST(KQuantInterleavedLayoutTest, Q5KCodesRoundTrip) {
  for (int p = 0; p < 4; ++p) {
    for (int v = 0; v < 256 * 4; ++v) {
      uint8_t qs[128] = {}, qh[32] = {}, a[128], b[32], qs2[128], qh2[32];
      qs[32 * p + 5] = static_cast<uint8_t>(v & 255);
      qh[5] = static_cast<uint8_t>((v >> 8) << (2 * p));
      EncodeQ5KCodes(qs, qh, a, b);
      const int lo = (v & 15) | (v >> 8 & 1) << 4, hi = (v >> 4 & 15) | (v >> 9 & 1) << 4;
      ASSERT_EQ(a[32 * p + 5] & 31, lo) << p << " " << v;
      ASSERT_EQ(a[32 * p + 5] >> 5 | (b[5] >> (2 * p) & 3) << 3, hi) << p << " " << v;
      DecodeQ5KCodes(a, b, qs2, qh2);
      ASSERT_EQ(0, std::memcmp(qs, qs2, sizeof(qs)));
      ASSERT_EQ(0, std::memcmp(qh, qh2, sizeof(qh)));
    }
  }
  ExpectInverseCodecs<32>(EncodeQ5KCodes, DecodeQ5KCodes, 5);
}

// Q6_K's re-coded codes (model_kernels.h): every (ql byte, qh byte) pair
// of positions decodes to GGUF's four codes and encodes back; and the two
// bytes are each other's inverse on random blocks.
TEST(KQuantInterleavedLayoutTest, Q6KCodesRoundTrip) {
  for (int m = 0; m < 2; ++m) {
    for (int v = 0; v < 256 * 256; ++v) {
      uint8_t ql[128] = {}, qh[64] = {}, a[128], b[64], ql2[128], qh2[64];
      ql[64 + 32 * m + 7] = static_cast<uint8_t>(v & 255);  // h = 1, l = 7
      qh[32 + 7] = static_cast<uint8_t>(v >> 8);
      EncodeQ6KCodes(ql, qh, a, b);
      const int q = m, q2 = m + 2;  // the codes this ql byte holds
      const int code = (v & 15) | (v >> (8 + 2 * q) & 3) << 4, code2 = (v >> 4 & 15) | (v >> (8 + 2 * q2) & 3) << 4;
      ASSERT_EQ(a[64 + 32 * m + 7] & 63, code) << m << " " << v;
      ASSERT_EQ((b[32 + 7] >> (4 * m) & 15) | (a[64 + 32 * m + 7] >> 6) << 4, code2) << m << " " << v;
      DecodeQ6KCodes(a, b, ql2, qh2);
      ASSERT_EQ(0, std::memcmp(ql, ql2, sizeof(ql)));
      ASSERT_EQ(0, std::memcmp(qh, qh2, sizeof(qh)));
    }
  }
  ExpectInverseCodecs<64>(EncodeQ6KCodes, DecodeQ6KCodes, 6);
}

}  // namespace
}  // namespace kvedge
#endif  // KVEDGE_TESTS_SIMD_MATVEC_KQUANT_INTERLEAVED_TEST_HELPERS_

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

// One super-block, a few, past the 16-super-block activation chunk and past
// 64 (matvec_kquant.cc's chunk).
const size_t kCols[] = {256, 3 * 256, 4096 + 256, 16384 + 512};

// MatVec on the interleaved copy == the Q8_K reference on the GGUF rows ==
// the reference reading the interleaved copy, bit for bit; row ranges.
void TestInterleavedKEqualsQ8KReference() {
  ExpectInterleavedKQuantEqualsQ8KReference({std::begin(kILKTypes), std::end(kILKTypes)},
                                            {std::begin(kCols), std::end(kCols)}, 73);
}

// Extreme blocks: every byte but d (and Q4_K's and Q5_K's dmin) 0x00, 0xFF, 0xAA, 0x55
// or 0x80 (largest codes, scales and mins at once; Q6_K's scales −1, −86,
// 85, −128) against activations whose codes are all ±127/128 (one sign,
// alternating, by halves of 32): the largest int16 pair sums of the AVX2
// paths and the largest S and M; bit for bit.
void TestInterleavedKExtremeBlocks() {
  std::mt19937 rng(79);
  const size_t cols = 2 * kSuperBlock, rows = 19;
  for (WeightType t : kILKTypes) {
    const size_t block_bytes = WeightRowBytes(t, kSuperBlock);
    // The bytes after Q4_K's and Q5_K's d and dmin; before Q6_K's d.
    const size_t fill_begin = t == WeightType::kQ6_K ? 0 : 4;
    const size_t fill_end = t == WeightType::kQ6_K ? block_bytes - 2 : block_bytes;
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0xAA}, uint8_t{0x55}, uint8_t{0x80}}) {
      TestMatrix m = RandomMatrix(t, rows, cols, rng);
      for (size_t off = 0; off < m.bytes.size(); off += block_bytes) {
        std::fill(m.bytes.begin() + off + fill_begin, m.bytes.begin() + off + fill_end, fill);
      }
      const TestMatrix il = InterleavedCopy(m.view);
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<float> x(cols);
        for (size_t i = 0; i < cols; ++i) {
          const float sign =
              pattern == 0 ? 1.0f : pattern == 1 ? (i % 2 == 0 ? 1.0f : -1.0f) : (i % 64 < 32 ? -1.0f : 1.0f);
          x[i] = 3.0f * sign;
        }
        std::vector<float> y(rows), want(rows);
        MatVec(il.view, x.data(), y.data(), nullptr);
        ref::MatVecRowsQ8K(m.view, x.data(), want.data(), 0, rows);
        for (size_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[r], want[r]) << WeightTypeName(t) << " fill=" << int{fill} << " pattern=" << pattern
                                   << " r=" << r;
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
// On AVX2 with AVX-VNNI the Q4_K/Q5_K tiles run both ways (vpdpbusd, and
// vpmaddubsw as on CPUs without it).
void TestInterleavedKMatMulAndThreads() {
  // 27 super-blocks: past the 24 of an activation chunk.
  const size_t long_cols = static_cast<size_t>(ScaledCount(6144 + 768, 768)) / kSuperBlock * kSuperBlock;
  const auto run = [&](uint32_t seed) {
    ExpectMatMulEqualsMatVecForTypes({std::begin(kILKTypes), std::end(kILKTypes)}, {512, long_cols}, seed,
                                     RandomKQuantActivations, {{37, 64}, {1, 2, 3, 4, 5, 8, 9, 15}, true});
  };
  run(83);
  if (HWY_TARGET == HWY_AVX2 && CpuHasAvxVnni()) WithoutAvxVnni([&] { run(84); });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_BEFORE_TEST(KQuantInterleavedTest);
HWY_EXPORT_AND_TEST_P(KQuantInterleavedTest, TestInterleavedKEqualsQ8KReference);
HWY_EXPORT_AND_TEST_P(KQuantInterleavedTest, TestInterleavedKExtremeBlocks);
HWY_EXPORT_AND_TEST_P(KQuantInterleavedTest, TestInterleavedKMatMulAndThreads);

}  // namespace kvedge
#endif  // HWY_ONCE
