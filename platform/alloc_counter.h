// Counts heap allocations so tests and the soak tool can prove a region
// allocates nothing. Every kvedge aligned allocation is counted; operator new
// is counted in binaries that link kvedge_alloc_hook (tests, the CLI).
#ifndef KVEDGE_PLATFORM_ALLOC_COUNTER_H_
#define KVEDGE_PLATFORM_ALLOC_COUNTER_H_

#include <cstdint>

namespace kvedge {

// Allocations made so far by the whole process / by the calling thread.
int64_t ProcessAllocationCount();
int64_t ThreadAllocationCount();
// True when operator new is being counted (kvedge_alloc_hook is linked).
bool AllocationHookInstalled();

// Called by every allocation path that kvedge counts.
void NoteAllocation();

// Allocations by this thread since construction. Not thread-safe to share.
class ScopedAllocationCounter {
 public:
  ScopedAllocationCounter() : start_(ThreadAllocationCount()) {}
  int64_t count() const { return ThreadAllocationCount() - start_; }

 private:
  int64_t start_;
};

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_ALLOC_COUNTER_H_
