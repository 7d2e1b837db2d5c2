// Replaces the global operator new/delete with counting versions over malloc.
// Linked only into executables (tests, CLI, tools), never into the library.
#include <atomic>
#include <cstdlib>
#include <new>

#include "platform/alloc_counter.h"

namespace kvedge {
extern std::atomic<bool> g_alloc_hook_installed;
namespace {
struct HookMarker {
  HookMarker() { g_alloc_hook_installed.store(true); }
} g_marker;

void* CountedNew(std::size_t size) {
  NoteAllocation();
  if (size == 0) size = 1;
  void* p = std::malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* CountedNewAligned(std::size_t size, std::align_val_t align) {
  NoteAllocation();
  std::size_t a = static_cast<std::size_t>(align);
  if (a < sizeof(void*)) a = sizeof(void*);
  void* p = nullptr;
  if (posix_memalign(&p, a, size == 0 ? 1 : size) != 0) throw std::bad_alloc();
  return p;
}
}  // namespace
}  // namespace kvedge

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
