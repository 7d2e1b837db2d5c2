#include "platform/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kvedge {

StatusOr<DirLock> DirLock::Acquire(const std::string& dir) {
  const std::string path = dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot open the lock file '" + path + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    std::string owner;
    if (e == EWOULDBLOCK) {
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
      for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) owner += buf[i];
    }
    ::close(fd);
    if (e != EWOULDBLOCK) return IoError("cannot lock '" + path + "': " + std::strerror(e));
    return FailedPrecondition("the directory '" + dir + "' is in use by another process" +
                              (owner.empty() ? std::string() : " (pid " + owner + ")") + ": its lock '" + path +
                              "' is held");
  }
  // The pid is only a hint for the message above: failing to write it
  // changes nothing about the lock.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd, pid.data(), pid.size(), 0);
  }
  return DirLock(fd);
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kvedge
