// The process-wide allocation counter.
#include "platform/alloc_counter.h"

#include <atomic>

namespace kvedge {
namespace {
// Constant-initialised: allocations before main (static constructors, the
// loader) count safely.
constinit std::atomic<int64_t> g_process_allocations{0};
}  // namespace

// Set by kvedge_alloc_hook's static initializer.
constinit std::atomic<bool> g_alloc_hook_installed{false};
constinit std::atomic<bool> g_alloc_hook_counts_malloc{false};

void NoteAllocation() { g_process_allocations.fetch_add(1, std::memory_order_relaxed); }

int64_t ProcessAllocationCount() { return g_process_allocations.load(std::memory_order_relaxed); }
bool AllocationHookInstalled() { return g_alloc_hook_installed.load(std::memory_order_relaxed); }
bool AllocationHookCountsMalloc() { return g_alloc_hook_counts_malloc.load(std::memory_order_relaxed); }

}  // namespace kvedge
