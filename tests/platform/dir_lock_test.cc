// DirLock: one owner per directory; the next is refused with the owner's pid
// until the first lets go.
#include "platform/dir_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(DirLockTest, SecondOwnerIsRefusedUntilTheFirstLetsGo) {
  const std::string dir = FreshDir("dirlock_a");
  auto first = DirLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->held());

  // flock(2) locks belong to an open file description: a second open of the
  // lock file conflicts even inside one process, as another server would.
  auto second = DirLock::Acquire(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  const std::string msg = second.status().message();
  EXPECT_NE(msg.find("'" + dir + "' is in use"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pid " + std::to_string(::getpid())), std::string::npos) << msg;

  // Moving keeps the one lock; destroying the owner releases it.
  DirLock moved = std::move(first).value();
  EXPECT_TRUE(moved.held());
  EXPECT_FALSE(DirLock::Acquire(dir).ok());
  moved = DirLock();
  auto third = DirLock::Acquire(dir);
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

TEST(DirLockTest, MissingDirectoryIsAnIoError) {
  auto lock = DirLock::Acquire(testing::TempDir() + "/dirlock_missing/sub");
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.status().code(), StatusCode::kIoError);
  EXPECT_NE(lock.status().message().find("dirlock_missing/sub/.lock"), std::string::npos) << lock.status().message();
}

}  // namespace
}  // namespace kvedge
