// Block size table and the scalar f16/bf16 conversions.
#include "simd/kv_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace kvedge {
namespace {

TEST(KvFormatTest, BlockBytes) {
  // int4 keys at D=8: 32 tokens × 8 ch / 2 = 128 B codes + 8 × 4 B scale/min.
  EXPECT_EQ(KeyBlockBytes(KvFormat::kInt4, 8), 128u + 32u);
  EXPECT_EQ(ValueBlockBytes(KvFormat::kInt4, 8), 128u + 8u * 4u);
  EXPECT_EQ(KeyBlockBytes(KvFormat::kInt8, 128), 4096u + 512u);
  EXPECT_EQ(ValueBlockBytes(KvFormat::kInt8, 128), 4096u + 128u * 4u);
  EXPECT_EQ(KeyBlockBytes(KvFormat::kF16, 64), 32u * 64u * 2u);
  EXPECT_EQ(ValueBlockBytes(KvFormat::kF32, 64), 32u * 64u * 4u);
  // INT4 keys+values are 3.2x smaller than f16 at every supported head dim.
  for (int d : {8, 16, 32, 64, 128, 256}) {
    const double f16 = static_cast<double>(KeyBlockBytes(KvFormat::kF16, d) + ValueBlockBytes(KvFormat::kF16, d));
    const double q4 = static_cast<double>(KeyBlockBytes(KvFormat::kInt4, d) + ValueBlockBytes(KvFormat::kInt4, d));
    EXPECT_GE(f16 / q4, 3.2 - 1e-9) << d;
  }
}

TEST(KvFormatTest, HeadDims) {
  for (int d : {8, 16, 24, 32, 40, 48, 64, 80, 96, 112, 128, 160, 200, 256}) EXPECT_TRUE(IsSupportedHeadDim(d)) << d;
  for (int d : {0, 4, 12, 20, 44, 264, 512}) EXPECT_FALSE(IsSupportedHeadDim(d)) << d;
}

TEST(KvFormatTest, Names) {
  KvFormat f;
  EXPECT_TRUE(ParseKvFormat("int4", &f));
  EXPECT_EQ(f, KvFormat::kInt4);
  EXPECT_FALSE(ParseKvFormat("q4_0", &f));
  EXPECT_STREQ(KvFormatName(KvFormat::kF16), "f16");
}

TEST(F16Test, ExactValuesRoundTrip) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(F32FromF16(F16FromF32(v)), v) << v;
  }
  EXPECT_EQ(F16FromF32(1.0f), 0x3C00);
  EXPECT_EQ(F16FromF32(65520.0f), 0x7C00);  // rounds to inf
  EXPECT_TRUE(std::isnan(F32FromF16(F16FromF32(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(F16Test, AllHalvesRoundTripThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = F32FromF16(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F16FromF32(f), h) << h;
  }
}

TEST(F16Test, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(F16FromF32(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(F16FromF32(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Relative error bound for normal numbers.
  for (float v = 1e-4f; v < 6e4f; v *= 1.37f) {
    EXPECT_LE(std::fabs(F32FromF16(F16FromF32(v)) - v), v * std::ldexp(1.0f, -11)) << v;
  }
}

TEST(BF16Test, RoundTrip) {
  EXPECT_EQ(F32FromBF16(BF16FromF32(1.0f)), 1.0f);
  EXPECT_EQ(F32FromBF16(BF16FromF32(-3.0f)), -3.0f);
  EXPECT_NEAR(F32FromBF16(BF16FromF32(3.14159f)), 3.14159f, 0.02f);
}

}  // namespace
}  // namespace kvedge
