// Target report: compiled targets include the chosen one and the fallback.
#include "platform/target_report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hwy/targets.h"

namespace kvedge {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(TargetReportTest, ChosenIsCompiledAndSupported) {
  const TargetReport r = GetTargetReport();
  ASSERT_FALSE(r.compiled.empty());
  ASSERT_FALSE(r.supported.empty());
  EXPECT_TRUE(Contains(r.compiled, r.chosen)) << r.chosen;
  EXPECT_TRUE(Contains(r.supported, r.chosen)) << r.chosen;
  EXPECT_EQ(r.supported.front(), r.chosen);  // dispatch takes the best
  EXPECT_TRUE(Contains(r.compiled, "SCALAR"));
  EXPECT_GE(r.hardware_threads, 1);
}

TEST(TargetReportTest, ArchitectureTargets) {
  const TargetReport r = GetTargetReport();
  if (r.arch == "x86_64") {
    EXPECT_TRUE(Contains(r.compiled, "AVX2"));
    EXPECT_TRUE(Contains(r.compiled, "AVX3"));
  } else if (r.arch == "aarch64") {
    EXPECT_TRUE(Contains(r.compiled, "NEON"));
    EXPECT_TRUE(Contains(r.compiled, "SVE"));
    EXPECT_TRUE(Contains(r.compiled, "SVE2"));
  }
}

// "AVX2" is the AVX2 target without AVX-VNNI, "AVX2_VNNI" with it (only
// where the CPU has it); each choice is what dispatch and the report name.
TEST(TargetReportTest, RestrictToAvx2WithAndWithoutAvxVnni) {
  if ((hwy::SupportedTargets() & HWY_AVX2) == 0 || HWY_ARCH_X86 == 0) GTEST_SKIP() << "no AVX2 on this CPU";
  ASSERT_TRUE(RestrictDispatch("avx2").ok());
  EXPECT_EQ(DispatchedTargetName(), "AVX2");
  EXPECT_FALSE(AvxVnniEnabled());
  const Status s = RestrictDispatch("AVX2_VNNI");
  if (CpuHasAvxVnni()) {
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(DispatchedTargetName(), "AVX2_VNNI");
    EXPECT_TRUE(AvxVnniEnabled());
    EXPECT_TRUE(Contains(GetTargetReport().supported, "AVX2_VNNI"));
  } else {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("AVX2_VNNI"), std::string::npos) << s.message();
    EXPECT_FALSE(AvxVnniEnabled());
    EXPECT_FALSE(Contains(GetTargetReport().supported, "AVX2_VNNI"));
  }
  SetAvxVnniEnabled(false);
  EXPECT_FALSE(AvxVnniEnabled());
  hwy::SetSupportedTargetsForTest(0);
  SetAvxVnniEnabled(true);
  EXPECT_EQ(AvxVnniEnabled(), CpuHasAvxVnni());
  EXPECT_TRUE(Contains(GetTargetReport().compiled, "AVX2_VNNI"));
}

}  // namespace
}  // namespace kvedge
