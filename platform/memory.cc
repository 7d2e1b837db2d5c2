// mimalloc-backed aligned buffers, budgets, size parsing and RSS readings.
#include "platform/memory.h"

#ifndef KVEDGE_NO_MIMALLOC
#include <mimalloc.h>
#endif
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "platform/alloc_counter.h"

namespace kvedge {


std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.*f %s", v < 10 ? 2 : 1, v, kUnits[u]);
  }
  return buf;
}

StatusOr<uint64_t> ParseByteSize(const std::string& text) {
  const auto bad = [&text]() {
    return InvalidArgument("cannot read '" + text +
                           "' as a size: expected a number with an optional unit B, KiB, MiB or GiB "
                           "(e.g. 64MiB, 1.5GiB, 4096)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0 || i > 24) return bad();
  const std::string number = text.substr(0, i);
  if (number.find('.') != number.rfind('.') || number == ".") return bad();
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return bad();
  std::string unit;
  for (size_t j = i; j < text.size(); ++j) {
    if (text[j] == ' ' && unit.empty()) continue;
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[j])));
  }
  double mult;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    mult = 1024.0;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    mult = 1024.0 * 1024;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit == "t" || unit == "tb" || unit == "tib") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return bad();
  }
  const double bytes = value * mult;
  if (bytes >= 1.8e19) return InvalidArgument("size '" + text + "' is too large");
  if (mult == 1 && value != std::floor(value)) return bad();
  return static_cast<uint64_t>(std::llround(bytes));
}

MemoryBudget::MemoryBudget(std::string name, uint64_t limit_bytes)
    : name_(std::move(name)), limit_(limit_bytes) {}

Status MemoryBudget::Reserve(uint64_t bytes, const char* what) {
  uint64_t cur = used_.load(std::memory_order_relaxed);
  for (;;) {
    if (bytes > limit_ - cur) {
      return ResourceExhausted(std::string(what) + " needs " + FormatBytes(bytes) + " but " + name_ +
                               " has " + FormatBytes(limit_ - cur) + " left of " + FormatBytes(limit_));
    }
    if (used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed)) break;
  }
  const uint64_t now = cur + bytes;
  uint64_t hw = high_water_.load(std::memory_order_relaxed);
  while (now > hw && !high_water_.compare_exchange_weak(hw, now, std::memory_order_relaxed)) {
  }
  return OkStatus();
}

void MemoryBudget::Release(uint64_t bytes) {
  const uint64_t before = used_.fetch_sub(bytes, std::memory_order_relaxed);
  KVEDGE_CHECK(before >= bytes);
}

StatusOr<AlignedBuffer> AlignedBuffer::Allocate(size_t bytes, const char* what) {
  AlignedBuffer buf;
  if (bytes == 0) return buf;
  NoteAllocation();
#ifdef KVEDGE_NO_MIMALLOC
  // Sanitizer builds: the sanitizer's allocator, so it checks these blocks too.
  void* p = std::aligned_alloc(kAlignment, RoundUp(bytes, kAlignment));
  if (p != nullptr) std::memset(p, 0, RoundUp(bytes, kAlignment));
#else
  void* p = mi_zalloc_aligned(RoundUp(bytes, kAlignment), kAlignment);
#endif
  if (p == nullptr) {
    return ResourceExhausted(std::string("cannot allocate ") + FormatBytes(bytes) + " for " + what);
  }
  buf.data_ = static_cast<uint8_t*>(p);
  buf.size_ = bytes;
  return buf;
}

StatusOr<AlignedBuffer> AlignedBuffer::AllocatePages(size_t bytes, const char* what) {
  AlignedBuffer buf;
  if (bytes == 0) return buf;
  NoteAllocation();
  constexpr size_t kHuge = kHugePageBytes;
  const size_t size = RoundUp(bytes, kHuge);
  // Over-map by one huge page, then trim to a 2 MiB-aligned range.
  void* raw = ::mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return ResourceExhausted(std::string("cannot map ") + FormatBytes(bytes) + " for " + what);
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(base, kHuge);
  if (aligned > base) ::munmap(raw, aligned - base);
  if (base + kHuge > aligned) ::munmap(reinterpret_cast<void*>(aligned + size), base + kHuge - aligned);
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // advice only
#endif
  buf.data_ = reinterpret_cast<uint8_t*>(aligned);
  buf.size_ = bytes;
  buf.mapped_ = size;
  return buf;
}

StatusOr<AlignedBuffer> AlignedBuffer::Charged(MemoryBudget& budget, size_t reserved,
                                               StatusOr<AlignedBuffer> (*allocate)(size_t, const char*), size_t bytes,
                                               const char* what) {
  KVEDGE_RETURN_IF_ERROR(budget.Reserve(reserved, what));
  auto buf = allocate(bytes, what);
  if (!buf.ok()) {
    budget.Release(reserved);
    return buf.status();
  }
  buf->budget_ = &budget;
  return buf;
}

StatusOr<AlignedBuffer> AlignedBuffer::Allocate(MemoryBudget& budget, size_t bytes, const char* what) {
  return Charged(budget, bytes, &AlignedBuffer::Allocate, bytes, what);
}

StatusOr<AlignedBuffer> AlignedBuffer::AllocatePages(MemoryBudget& budget, size_t bytes, const char* what) {
  return Charged(budget, RoundUp(bytes, kHugePageBytes), &AlignedBuffer::AllocatePages, bytes, what);
}

StatusOr<AlignedBuffer> AlignedBuffer::AllocateStreamed(MemoryBudget* budget, size_t bytes, const char* what) {
#ifndef KVEDGE_NO_MIMALLOC
  if (bytes >= kStreamedPagesBytes) {
    // A budget without room for the rounding (even if another thread took it
    // since a look at available()) or a failed mapping: the heap, to the byte.
    auto pages = budget != nullptr ? AllocatePages(*budget, bytes, what) : AllocatePages(bytes, what);
    if (pages.ok()) return pages;
  }
#endif
  return budget != nullptr ? Allocate(*budget, bytes, what) : Allocate(bytes, what);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)),
      budget_(std::exchange(other.budget_, nullptr)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    budget_ = std::exchange(other.budget_, nullptr);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { Reset(); }

void AlignedBuffer::Reset() {
  if (data_ != nullptr) {
    if (mapped_ != 0) {
      ::munmap(data_, mapped_);
    } else {
#ifdef KVEDGE_NO_MIMALLOC
      std::free(data_);
#else
      mi_free(data_);
#endif
    }
  }
  if (budget_ != nullptr) budget_->Release(mapped_ != 0 ? mapped_ : size_);  // what was reserved
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
  budget_ = nullptr;
}

void ReturnFreedMemoryPromptly() {
#ifndef KVEDGE_NO_MIMALLOC
  mi_option_set(mi_option_decommit_delay, 0);  // ms; 2.1 calls it the purge delay (same option)
#endif
}

uint64_t StreamRead(const void* p, size_t bytes) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  const size_t words = bytes / sizeof(uint64_t);
  const auto word = [b](size_t i) {  // unaligned-safe load (tensors in a file are 4-byte aligned)
    uint64_t w;
    std::memcpy(&w, b + i * sizeof(uint64_t), sizeof(w));
    return w;
  };
  uint64_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= words; i += 8) {
    for (size_t k = 0; k < 8; ++k) s[k] += word(i + k);
  }
  for (; i < words; ++i) s[0] += word(i);
  uint64_t total = 0;
  for (uint64_t x : s) total += x;
  return total;
}

uint64_t PeakRssBytes() {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

uint64_t CurrentRssBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long pages_total = 0, pages_resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &pages_total, &pages_resident);
  std::fclose(f);
  if (n != 2) return 0;
  return pages_resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace kvedge
