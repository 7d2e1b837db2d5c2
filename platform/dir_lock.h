// DirLock: one process at a time owns a directory of state files (a
// server's --session-dir). Two servers writing the same session files would
// overwrite each other's conversations; the second one is refused instead.
#ifndef KVEDGE_PLATFORM_DIR_LOCK_H_
#define KVEDGE_PLATFORM_DIR_LOCK_H_

#include <string>

#include "platform/status.h"

namespace kvedge {

// An exclusive flock(2) on `<dir>/.lock`, held until destruction (the kernel
// drops it when the process dies, so a crash leaves no stale lock). The file
// holds the owner's pid, for the error message of the next one. Move-only.
class DirLock {
 public:
  // Errors: kFailedPrecondition when another open of the lock file (another
  // process, or another DirLock in this one) holds it — naming the directory
  // and the pid written there; kIoError when the file cannot be opened.
  static StatusOr<DirLock> Acquire(const std::string& dir);

  DirLock() = default;
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

  bool held() const { return fd_ >= 0; }

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_DIR_LOCK_H_
