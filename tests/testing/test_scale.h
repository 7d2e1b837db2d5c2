// How much of a long-running test loop to run: KVEDGE_TEST_SCALE.
// Apart from test_data.h because that header's namespace kvedge::testing
// hides gtest's ::testing from code inside namespace kvedge, where
// Highway's HWY_EXPORT_AND_TEST_P expands its unqualified testing::ValuesIn
// (the per-target kernel tests).
#ifndef KVEDGE_TESTS_TESTING_TEST_SCALE_H_
#define KVEDGE_TESTS_TESTING_TEST_SCALE_H_

namespace kvedge {

// `n` scaled by KVEDGE_TEST_SCALE (default 1; ctest sets 0.02 when tests run
// under qemu, ≈20–50x slower), at least `minimum`. For the long-running loops
// (steady-state decode, long streams, create/destroy cycles, kernel sweeps):
// the property they check does not depend on the count, only its strength does.
int ScaledCount(int n, int minimum);

// True when KVEDGE_TEST_SCALE < 1 (qemu, sanitizers): the long kernel sweeps
// then take a shorter case of the same tiles and tails.
bool QuickRun();

}  // namespace kvedge

#endif  // KVEDGE_TESTS_TESTING_TEST_SCALE_H_
