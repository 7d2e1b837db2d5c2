// Counts heap allocations so tests and the soak tool can prove a region
// allocates nothing. Every kvedge aligned allocation is counted; in binaries
// that link kvedge_alloc_hook (tests, the CLI) every operator new, and in
// release builds every malloc-family call too, on every thread of the process.
#ifndef KVEDGE_PLATFORM_ALLOC_COUNTER_H_
#define KVEDGE_PLATFORM_ALLOC_COUNTER_H_

#include <cstdint>

namespace kvedge {

// Allocations made so far by the whole process (all threads).
int64_t ProcessAllocationCount();
// True when operator new is being counted (kvedge_alloc_hook is linked).
bool AllocationHookInstalled();
// True when malloc, calloc, realloc and the aligned C allocators are counted
// too: kvedge_alloc_hook in a build without a sanitizer (which owns malloc).
bool AllocationHookCountsMalloc();

// Called by every allocation path that kvedge counts. Async-signal-safe, no
// allocation (one relaxed atomic add).
void NoteAllocation();

// Allocations by the whole process (every thread: workers included) since
// construction. A region measured with it must not overlap other work that
// allocates, such as another test thread.
class ScopedAllocationCounter {
 public:
  ScopedAllocationCounter() : start_(ProcessAllocationCount()) {}
  int64_t count() const { return ProcessAllocationCount() - start_; }

 private:
  int64_t start_;
};

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_ALLOC_COUNTER_H_
