// Aligned allocation through mimalloc and MemoryBudget byte accounting.
// Everything big (KV arena, scratch) is reserved once from a budget.
#ifndef KVEDGE_PLATFORM_MEMORY_H_
#define KVEDGE_PLATFORM_MEMORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "platform/status.h"

namespace kvedge {

inline constexpr size_t kAlignment = 64;  // bytes: a cache line, ≥ any vector

// Rounds n up to a multiple of `align` (a power of two).
constexpr size_t RoundUp(size_t n, size_t align) { return (n + align - 1) & ~(align - 1); }

// "64 MiB", "1.5 GiB", "512 B".
std::string FormatBytes(uint64_t bytes);
// Parses "4096", "64KiB", "64MiB", "1.5GiB", "2G", "512k" (binary units).
// Errors name the text and the accepted forms.
StatusOr<uint64_t> ParseByteSize(const std::string& text);

// Byte accounting with a hard limit. Reserve() refuses (kResourceExhausted)
// anything beyond the limit. Thread-safe.
class MemoryBudget {
 public:
  // `name` appears in error messages ("KV arena budget").
  MemoryBudget(std::string name, uint64_t limit_bytes);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  Status Reserve(uint64_t bytes, const char* what);
  void Release(uint64_t bytes);

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t available() const { return limit_ - used(); }
  uint64_t high_water() const { return high_water_.load(std::memory_order_relaxed); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> high_water_{0};
};

// 64-byte aligned, zero-initialised heap block from mimalloc. Move-only owner.
// When made from a budget, destruction releases the bytes to it (the budget
// must outlive the buffer).
class AlignedBuffer {
 public:
  static StatusOr<AlignedBuffer> Allocate(size_t bytes, const char* what);
  static StatusOr<AlignedBuffer> Allocate(MemoryBudget& budget, size_t bytes, const char* what);
  // Straight from the OS (mmap), 2 MiB aligned and advised to use transparent
  // huge pages before the first touch (Linux MADV_HUGEPAGE; 4 KiB pages where
  // THP is off). For big, long-lived, streamed buffers such as interleaved
  // weights: fewer page faults to fill them, fewer TLB misses to stream them.
  static StatusOr<AlignedBuffer> AllocatePages(size_t bytes, const char* what);
  // As above, reserving the whole mapping (bytes rounded up to kHugePageBytes:
  // what the process may hold resident) from the budget.
  static StatusOr<AlignedBuffer> AllocatePages(MemoryBudget& budget, size_t bytes, const char* what);
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  // For big buffers streamed over and over (the KV arena): from
  // kStreamedPagesBytes on, AllocatePages when the budget (if any) has room
  // for the rounding (≤ 3 % at that size); the heap below that (a server's
  // many small sessions stay sized to the byte), and always in sanitizer
  // builds, so that the sanitizer checks every access.
  static StatusOr<AlignedBuffer> AllocateStreamed(MemoryBudget* budget, size_t bytes, const char* what);
  static constexpr size_t kStreamedPagesBytes = size_t{64} << 20;

  AlignedBuffer() = default;
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data_); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_); }

 private:
  void Reset();
  // allocate(bytes, what) with `reserved` bytes charged to the budget (given
  // back if it fails, and by the buffer when it goes).
  static StatusOr<AlignedBuffer> Charged(MemoryBudget& budget, size_t reserved,
                                         StatusOr<AlignedBuffer> (*allocate)(size_t, const char*), size_t bytes,
                                         const char* what);

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped by AllocatePages (0: from mimalloc)
  MemoryBudget* budget_ = nullptr;
};

// Makes the allocator give freed pages back to the OS at once instead of
// after a delay (mimalloc's decommit delay 0; nothing in sanitizer builds).
// For long-lived processes with many threads that allocate per request (the
// server): mimalloc decommits a thread's free spans only at a later segment
// operation of that thread after the delay, so 64 HTTP threads kept, each,
// the most their requests ever used (a /v1/sessions listing grows with the
// sessions), and the resident set grew with memory no one used. The price is
// paid per request (freed pages are faulted in again), not per token: the
// decode loops never allocate. Call before starting threads.
void ReturnFreedMemoryPromptly();

// Peak and current resident set size of this process, bytes.
uint64_t PeakRssBytes();
uint64_t CurrentRssBytes();

// Reads the whole 64-bit words of [p, p + bytes) and returns their sum
// (eight independent chains, so the adds never bound it; bytes past the last
// whole word are not read): a plain streaming read at the memory system's
// pace, the probe that bandwidth-bound figures are stated against
// (kvedge_bench_kernels' MemoryRead, `kvedge bench --bound`). p: any alignment.
uint64_t StreamRead(const void* p, size_t bytes);

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_MEMORY_H_
