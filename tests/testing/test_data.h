// Locating the real models and text in ../shared/ from tests.
#ifndef KVEDGE_TESTS_TESTING_TEST_DATA_H_
#define KVEDGE_TESTS_TESTING_TEST_DATA_H_

#include <string>

namespace kvedge::testing {

// The shared folder (KVEDGE_SHARED in the environment, else the configured
// default). SharedPath("models/stories260K.bin") → absolute path.
std::string SharedDir();
std::string SharedPath(const std::string& relative);
// A fresh empty directory for the calling test's scratch files.
std::string TempDir();

// `n` scaled by KVEDGE_TEST_SCALE (default 1; ctest sets 0.02 when tests run
// under qemu, ≈20–50x slower), at least `minimum`. For the long-running loops
// (steady-state decode, long streams, create/destroy cycles): the property
// they check does not depend on the count, only its strength does.
int ScaledCount(int n, int minimum);

}  // namespace kvedge::testing

#endif  // KVEDGE_TESTS_TESTING_TEST_DATA_H_
