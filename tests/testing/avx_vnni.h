// Running a per-target test once more with the AVX2 kernels' AVX-VNNI paths
// off (platform/target_report.h), so a CPU that has AVX-VNNI also tests the
// vpmaddubsw/vpmaddwd paths of CPUs without it.
#ifndef KVEDGE_TESTS_TESTING_AVX_VNNI_H_
#define KVEDGE_TESTS_TESTING_AVX_VNNI_H_

#include "platform/target_report.h"

namespace kvedge {

// Calls f() with AvxVnniEnabled() false, then restores the setting it found
// (also when f returns early on a failed ASSERT).
template <class F>
void WithoutAvxVnni(F&& f) {
  struct Restore {
    bool was;
    ~Restore() { SetAvxVnniEnabled(was); }
  } restore{AvxVnniEnabled()};
  SetAvxVnniEnabled(false);
  f();
}

}  // namespace kvedge

#endif  // KVEDGE_TESTS_TESTING_AVX_VNNI_H_
