// Report of the CPU and of the Highway SIMD targets: compiled into this
// binary, supported by this CPU, and the one runtime dispatch uses.
#ifndef KVEDGE_PLATFORM_TARGET_REPORT_H_
#define KVEDGE_PLATFORM_TARGET_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "platform/status.h"

namespace kvedge {

struct TargetReport {
  std::string cpu;                       // model name, or the architecture
  std::string arch;                      // "x86_64" or "aarch64"
  std::vector<std::string> compiled;     // best first
  std::vector<std::string> supported;    // compiled ∩ this CPU, best first
  std::string chosen;                    // what HWY_DYNAMIC_DISPATCH runs
  int hardware_threads = 1;
};

TargetReport GetTargetReport();

// Name of the target dispatch selects, e.g. "AVX3", "NEON", "SVE_256".
std::string DispatchedTargetName();

// Restricts dispatch to one compiled target this CPU supports, by name as
// DispatchedTargetName spells it (case-insensitive), e.g. "AVX2" to measure
// what an AVX2 laptop runs on an AVX-512 machine. Call before any kernel
// runs (process start); not thread-safe. Errors name the target and the
// supported ones.
Status RestrictDispatch(const std::string& target);

// RestrictDispatch(value of the environment variable KVEDGE_SIMD) if it is
// set and non-empty; OK otherwise. For the CLI and the benchmarks.
Status RestrictDispatchFromEnvironment();

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_TARGET_REPORT_H_
