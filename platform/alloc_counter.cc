// Process-wide and per-thread allocation counters.
#include "platform/alloc_counter.h"

#include <atomic>

namespace kvedge {
namespace {
std::atomic<int64_t> g_process_allocations{0};
thread_local int64_t t_thread_allocations = 0;
}  // namespace

// Set by kvedge_alloc_hook's static initializer.
std::atomic<bool> g_alloc_hook_installed{false};

void NoteAllocation() {
  g_process_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_thread_allocations;
}

int64_t ProcessAllocationCount() { return g_process_allocations.load(std::memory_order_relaxed); }
int64_t ThreadAllocationCount() { return t_thread_allocations; }
bool AllocationHookInstalled() { return g_alloc_hook_installed.load(std::memory_order_relaxed); }

}  // namespace kvedge
