// Target report: compiled targets include the chosen one and the fallback.
#include "platform/target_report.h"

#include <gtest/gtest.h>

#include <algorithm>

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

}  // namespace
}  // namespace kvedge
