// Counting allocation entry points for the allocation counter
// (platform/alloc_counter.h). Linked only into executables (tests, CLI,
// tools), never into the library.
//
// Release builds count every heap allocation of the process, on every thread:
// the C allocation functions (malloc, calloc, realloc, reallocarray,
// aligned_alloc, posix_memalign, memalign, valloc, pvalloc) are defined here
// over mimalloc, which the library links and which already serves as the
// process's malloc (libmimalloc exports these symbols; the executable's own
// definitions come first in symbol lookup, so oneTBB, libstdc++ and glibc
// allocate through them too). operator new/delete go through malloc/free.
//
// Sanitizer builds (ASan, TSan, MSan) cannot replace malloc: the sanitizer
// runtime owns it to track every block. There only operator new is counted
// (still process-wide); AllocationHookCountsMalloc() says so, and the release
// stages run the same zero-allocation tests with the full hook. Sanitizer
// builds do not link mimalloc at all (platform/CMakeLists.txt).
//
// Every replacement below must be exported from the executable: the tree is
// compiled with -fvisibility=hidden, and a definition that <new> or <stdlib.h>
// did not declare first (clang without -fsized-deallocation does not declare
// the sized operator delete) would be hidden. A shared library (libhwy, built
// with sized deallocation) would then bind its delete to another allocator's
// copy and free a block this hook's new had allocated.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "platform/alloc_counter.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVEDGE_HOOK_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define KVEDGE_HOOK_MALLOC 0
#endif
#endif
#ifndef KVEDGE_HOOK_MALLOC
#define KVEDGE_HOOK_MALLOC 1
#endif

#if KVEDGE_HOOK_MALLOC
#include <mimalloc.h>
#endif

namespace kvedge {
extern std::atomic<bool> g_alloc_hook_installed;
extern std::atomic<bool> g_alloc_hook_counts_malloc;
namespace {
struct HookMarker {
  HookMarker() {
    g_alloc_hook_installed.store(true);
    g_alloc_hook_counts_malloc.store(KVEDGE_HOOK_MALLOC != 0);
  }
} g_marker;

void* CountedNew(std::size_t size) {
  if (!KVEDGE_HOOK_MALLOC) NoteAllocation();  // else malloc counts it
  if (size == 0) size = 1;
  void* p = std::malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* CountedNewAligned(std::size_t size, std::align_val_t align) {
  if (!KVEDGE_HOOK_MALLOC) NoteAllocation();
  std::size_t a = static_cast<std::size_t>(align);
  if (a < sizeof(void*)) a = sizeof(void*);
  void* p = nullptr;
  if (posix_memalign(&p, a, size == 0 ? 1 : size) != 0) throw std::bad_alloc();
  return p;
}
}  // namespace
}  // namespace kvedge

#pragma GCC visibility push(default)
#if KVEDGE_HOOK_MALLOC
extern "C" {
void* malloc(size_t n) {
  kvedge::NoteAllocation();
  return mi_malloc(n);
}
void* calloc(size_t count, size_t n) {
  kvedge::NoteAllocation();
  return mi_calloc(count, n);
}
void* realloc(void* p, size_t n) {
  kvedge::NoteAllocation();  // a resize counts as an allocation, even in place
  return mi_realloc(p, n);
}
void* reallocarray(void* p, size_t count, size_t n) {
  kvedge::NoteAllocation();
  return mi_reallocarray(p, count, n);
}
void* aligned_alloc(size_t align, size_t n) {
  kvedge::NoteAllocation();
  return mi_aligned_alloc(align, n);
}
int posix_memalign(void** p, size_t align, size_t n) {
  kvedge::NoteAllocation();
  return mi_posix_memalign(p, align, n);
}
void* memalign(size_t align, size_t n) {
  kvedge::NoteAllocation();
  return mi_memalign(align, n);
}
void* valloc(size_t n) {
  kvedge::NoteAllocation();
  return mi_valloc(n);
}
void* pvalloc(size_t n) {
  kvedge::NoteAllocation();
  return mi_pvalloc(n);
}
void free(void* p) { mi_free(p); }
size_t malloc_usable_size(void* p) { return mi_usable_size(p); }
}  // extern "C"
#endif

void* operator new(std::size_t n) { return kvedge::CountedNew(n); }
void* operator new[](std::size_t n) { return kvedge::CountedNew(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try { return kvedge::CountedNew(n); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try { return kvedge::CountedNew(n); } catch (...) { return nullptr; }
}
void* operator new(std::size_t n, std::align_val_t a) { return kvedge::CountedNewAligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return kvedge::CountedNewAligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#pragma GCC visibility pop
