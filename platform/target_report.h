// Report of the CPU and of the Highway SIMD targets: compiled into this
// binary, supported by this CPU, and the one runtime dispatch uses.
#ifndef KVEDGE_PLATFORM_TARGET_REPORT_H_
#define KVEDGE_PLATFORM_TARGET_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_TARGET_REPORT_H_
