// Locating the real models and text in ../shared/ from tests.
#ifndef KVEDGE_TESTS_TESTING_TEST_DATA_H_
#define KVEDGE_TESTS_TESTING_TEST_DATA_H_

#include <string>

#include "tests/testing/test_scale.h"

namespace kvedge::testing {

// The shared folder (KVEDGE_SHARED in the environment, else the configured
// default). SharedPath("models/stories260K.bin") → absolute path.
std::string SharedDir();
std::string SharedPath(const std::string& relative);
// A fresh empty directory for the calling test's scratch files, removed when
// the test passes (kept when it fails).
std::string TempDir();

// test_scale.h's, so that testing::ScaledCount names it too.
using ::kvedge::ScaledCount;

}  // namespace kvedge::testing

#endif  // KVEDGE_TESTS_TESTING_TEST_DATA_H_
