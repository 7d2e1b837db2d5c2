// Test data paths and the test scale (test_scale.h).
#include "tests/testing/test_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace kvedge::testing {

std::string SharedDir() {
  const char* env = std::getenv("KVEDGE_SHARED");
  if (env != nullptr && env[0] != '\0') return env;
  return KVEDGE_SHARED_DIR_DEFAULT;
}

std::string SharedPath(const std::string& relative) { return SharedDir() + "/" + relative; }

namespace {

// Removes the directories TempDir made during a test when that test passes;
// a failed test's files stay for inspection. gtest owns it once appended.
class TempDirCleaner : public ::testing::EmptyTestEventListener {
 public:
  void Add(const std::filesystem::path& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(dir);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!info.result()->Failed()) {
      for (const std::filesystem::path& dir : dirs_) {
        std::error_code ignored;  // best effort: a leftover is not a failure
        std::filesystem::remove_all(dir, ignored);
      }
    }
    dirs_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<std::filesystem::path> dirs_;
};

TempDirCleaner& Cleaner() {
  static TempDirCleaner* const cleaner = [] {
    auto* c = new TempDirCleaner;
    ::testing::UnitTest::GetInstance()->listeners().Append(c);
    return c;
  }();
  return *cleaner;
}

}  // namespace

std::string TempDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "kvedge_test";
  if (info != nullptr) name += std::string("_") + info->test_suite_name() + "_" + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // Made inside a test: gone when it passes. (Outside one — a suite's setup — it stays.)
  if (info != nullptr) Cleaner().Add(dir);
  return dir.string();
}

}  // namespace kvedge::testing

namespace kvedge {

double TestScale() {
  const char* env = std::getenv("KVEDGE_TEST_SCALE");
  double scale = 1.0;
  if (env != nullptr && env[0] != '\0') scale = std::atof(env);
  if (!(scale > 0.0)) scale = 1.0;
  return std::min(scale, 1.0);
}

int ScaledCount(int n, int minimum) {
  const int scaled = static_cast<int>(n * TestScale());
  return scaled < minimum ? minimum : scaled;
}

bool QuickRun() { return TestScale() < 1.0; }

}  // namespace kvedge
