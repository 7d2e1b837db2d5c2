// Monotonic wall clock for reports (never used for pass/fail).
#ifndef KVEDGE_PLATFORM_CLOCK_H_
#define KVEDGE_PLATFORM_CLOCK_H_

#include <chrono>

namespace kvedge {

// Seconds on a monotonic clock with an arbitrary origin.
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_CLOCK_H_
