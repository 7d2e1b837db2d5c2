// Status / StatusOr behaviour and the error macros.
#include "platform/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace kvedge {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd value " + std::to_string(x));
  return x / 2;
}

Status Chain(int x, int* out) {
  KVEDGE_ASSIGN_OR_RETURN(int h, Half(x));
  KVEDGE_ASSIGN_OR_RETURN(*out, Half(h));
  return OkStatus();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(OkStatus().ok());
  const Status s = DataLoss("tensor 'x' ends past the file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "corrupt input: tensor 'x' ends past the file");
}

TEST(StatusTest, StatusOrCarriesValueOrError) {
  auto a = Half(8);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 4);
  auto b = Half(3);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "odd value 3");
}

TEST(StatusTest, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(Chain(12, &out).ok());
  EXPECT_EQ(out, 3);
  const Status s = Chain(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd value 3");
}

TEST(StatusTest, MoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> q = std::move(p).value();
  EXPECT_EQ(*q, 7);
}

TEST(StatusDeathTest, ValueOfErrorAborts) {
  EXPECT_DEATH({ (void)Half(1).value(); }, "odd value 1");
}

TEST(StatusDeathTest, CheckAbortsWithLocation) {
  EXPECT_DEATH(KVEDGE_CHECK(1 + 1 == 3), "status_test.cc:[0-9]+: 1 \\+ 1 == 3");
}

}  // namespace
}  // namespace kvedge
