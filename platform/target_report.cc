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
#include <cctype>
#include <cstdlib>
#include <fstream>

#include "platform/target_report.h"
#include "platform/thread_arena.h"

namespace kvedge {
HWY_EXPORT(ThisTarget);

std::string DispatchedTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(ThisTarget)()); }

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
    r.compiled.push_back(hwy::TargetName(bit));
    if (supported & bit) r.supported.push_back(hwy::TargetName(bit));
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
    if (upper == hwy::TargetName(bit)) {
      hwy::SetSupportedTargetsForTest(bit);
      return OkStatus();
    }
    names += std::string(names.empty() ? "" : ", ") + hwy::TargetName(bit);
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
