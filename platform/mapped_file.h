// MappedFile: a read-only memory map of a whole file (weights are used in place).
#ifndef KVEDGE_PLATFORM_MAPPED_FILE_H_
#define KVEDGE_PLATFORM_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "platform/status.h"

namespace kvedge {

// Owns the mapping; move-only. The bytes stay valid until destruction.
// Thread-safe for concurrent reads.
class MappedFile {
 public:
  // Errors: missing file (kNotFound), a directory or non-regular file,
  // an empty file (kInvalidArgument), permission or mmap failures (kIoError).
  static StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  // Tells the kernel the whole pages inside [p, p + bytes) are not needed
  // now: they leave this process's resident set (clean file pages, re-read
  // on the next access). For ranges copied elsewhere (interleaved weights).
  void DropPages(const void* p, size_t bytes) const;
  // DropPages, and the whole pages inside [p, p + bytes) become inaccessible
  // (PROT_NONE) for the mapping's life: a read there faults. For ranges whose
  // bytes are copied elsewhere and never read again. Without it the kernel
  // maps dropped pages back when a neighbour is read (fault-around maps a
  // window of cached pages around each fault, within the mapping's region).
  void RetirePages(const void* p, size_t bytes);
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void Reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_MAPPED_FILE_H_
