// Highway target discovery; one tiny dispatched function reports HWY_TARGET.
#include "platform/hwy_target_policy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "platform/target_report.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
int64_t ThisTarget() { return HWY_TARGET; }
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <fstream>

#if HWY_ARCH_X86
#include <cpuid.h>
#endif

#include "platform/target_report.h"
#include "platform/thread_arena.h"

namespace kvedge {
HWY_EXPORT(ThisTarget);

namespace {
// Relaxed: set at process start or between a test's kernel calls.
std::atomic<bool>& AvxVnniFlag() {
  static std::atomic<bool> flag{CpuHasAvxVnni()};
  return flag;
}
}  // namespace

bool CpuHasAvxVnni() {
#if HWY_ARCH_X86
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 1, a, b, c, d);
    return (a & (1u << 4)) != 0;  // AVX-VNNI; the OS saves ymm state wherever AVX2 dispatches
  }();
  return has;
#else
  return false;
#endif
}

bool AvxVnniEnabled() { return AvxVnniFlag().load(std::memory_order_relaxed); }

void SetAvxVnniEnabled(bool on) { AvxVnniFlag().store(on && CpuHasAvxVnni(), std::memory_order_relaxed); }

std::string DispatchedTargetName() {
  const int64_t target = HWY_DYNAMIC_DISPATCH(ThisTarget)();
#if HWY_ARCH_X86
  if (target == HWY_AVX2 && AvxVnniEnabled()) return "AVX2_VNNI";
#endif
  return hwy::TargetName(target);
}

namespace {
std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string implementer, part;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(value.begin());
    if (key == "model name" && !value.empty()) return value;
    if (key == "CPU implementer" && implementer.empty()) implementer = value;
    if (key == "CPU part" && part.empty()) part = value;
  }
  if (!implementer.empty()) return "implementer " + implementer + " part " + part;
  return "unknown";
}
}  // namespace

TargetReport GetTargetReport() {
  TargetReport r;
  r.cpu = CpuName();
#if HWY_ARCH_X86_64
  r.arch = "x86_64";
#elif HWY_ARCH_ARM_A64
  r.arch = "aarch64";
#else
  r.arch = "other";
#endif
  // Dispatch first: SupportedTargets() before it is safe, after it can make
  // later SVE dispatches pick a narrower target on Highway 1.0.3.
  r.chosen = DispatchedTargetName();
  const int64_t supported = hwy::SupportedTargets();
  for (int shift = 0; shift < 63; ++shift) {
    const int64_t bit = int64_t{1} << shift;
    if ((HWY_TARGETS & bit) == 0) continue;
    const std::string name = hwy::TargetName(bit);
    // The AVX2 target's kernels with AVX-VNNI, a choice of its own.
    if (HWY_ARCH_X86 && bit == HWY_AVX2) {
      r.compiled.push_back(name + "_VNNI");
      if ((supported & bit) && CpuHasAvxVnni()) r.supported.push_back(name + "_VNNI");
    }
    r.compiled.push_back(name);
    if (supported & bit) r.supported.push_back(name);
  }
  r.hardware_threads = HardwareThreads();
  return r;
}

Status RestrictDispatch(const std::string& target) {
  std::string upper = target;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const int64_t supported = hwy::SupportedTargets();
  std::string names;
  for (int shift = 0; shift < 63; ++shift) {
    const int64_t bit = int64_t{1} << shift;
    if ((HWY_TARGETS & bit) == 0 || (supported & bit) == 0) continue;
    const std::string name = hwy::TargetName(bit);
    const bool vnni = HWY_ARCH_X86 && bit == HWY_AVX2 && CpuHasAvxVnni();
    if (upper == name || (vnni && upper == name + "_VNNI")) {
      hwy::SetSupportedTargetsForTest(bit);
      SetAvxVnniEnabled(upper != name);
      return OkStatus();
    }
    names += std::string(names.empty() ? "" : ", ") + name + (vnni ? ", " + name + "_VNNI" : "");
  }
  return InvalidArgument("SIMD target '" + target + "' is not compiled in or not supported by this CPU (use one of: " +
                         names + ")");
}

Status RestrictDispatchFromEnvironment() {
  const char* value = std::getenv("KVEDGE_SIMD");
  if (value == nullptr || value[0] == '\0') return OkStatus();
  Status s = RestrictDispatch(value);
  if (!s.ok()) return InvalidArgument("KVEDGE_SIMD: " + s.message());
  return OkStatus();
}

}  // namespace kvedge
#endif  // HWY_ONCE
