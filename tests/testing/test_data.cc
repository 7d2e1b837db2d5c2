// Test data paths and the test scale (test_scale.h).
#include "tests/testing/test_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace kvedge::testing {

std::string SharedDir() {
  const char* env = std::getenv("KVEDGE_SHARED");
  if (env != nullptr && env[0] != '\0') return env;
  return KVEDGE_SHARED_DIR_DEFAULT;
}

std::string SharedPath(const std::string& relative) { return SharedDir() + "/" + relative; }

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
