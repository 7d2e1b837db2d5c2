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

// Name of the target dispatch selects, e.g. "AVX3", "NEON", "SVE_256";
// "AVX2_VNNI" for AVX2 with AVX-VNNI in use (AvxVnniEnabled).
std::string DispatchedTargetName();

// AVX-VNNI: vpdpwssd/vpdpbusd on ymm in VEX encoding, on CPUs with AVX2 and
// no AVX-512 VNNI of their own (Intel Alder Lake and later, Sierra Forest;
// AMD Zen 5 has it beside AVX-512). Highway 1.0.3 has no target for it, so
// the AVX2 kernels check AvxVnniEnabled() at run time. CPUID leaf 7.1 EAX
// bit 4, read once.
bool CpuHasAvxVnni();
// True when the AVX2 kernels use AVX-VNNI: the CPU has it and neither
// RestrictDispatch("AVX2") nor SetAvxVnniEnabled(false) turned it off.
bool AvxVnniEnabled();
// Turns the AVX2 kernels' AVX-VNNI use on (where the CPU has it) or off.
// For RestrictDispatch and tests; not for use while kernels run.
void SetAvxVnniEnabled(bool on);

// Restricts dispatch to one compiled target this CPU supports, by name as
// DispatchedTargetName spells it (case-insensitive), e.g. "AVX2" to measure
// what an AVX2 laptop runs on an AVX-512 machine: "AVX2" without AVX-VNNI
// (Haswell … Zen 3), "AVX2_VNNI" with it (Alder Lake …; only where the CPU
// has it). Call before any kernel
// runs (process start); not thread-safe. Errors name the target and the
// supported ones.
Status RestrictDispatch(const std::string& target);

// RestrictDispatch(value of the environment variable KVEDGE_SIMD) if it is
// set and non-empty; OK otherwise. For the CLI and the benchmarks.
Status RestrictDispatchFromEnvironment();

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_TARGET_REPORT_H_
