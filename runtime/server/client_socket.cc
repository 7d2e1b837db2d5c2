// The request's socket by its address pair; end of stream by a peek.
#include "runtime/server/client_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

namespace kvedge::server {
namespace {

using AddressOf = int (*)(int, sockaddr*, socklen_t*);

// The numeric host and port of one end of `fd` (getsockname or getpeername),
// formatted as httplib formats Request::local_addr / remote_addr. False when
// `fd` is not a connected IP socket.
bool Address(int fd, AddressOf of, std::string* host, int* port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (of(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (addr.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return false;
  }
  char buf[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  *host = buf;
  return true;
}

}  // namespace

ClientSocket ClientSocket::Find(const std::string& local_addr, int local_port, const std::string& peer_addr,
                                int peer_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return ClientSocket();
  // Descriptors other threads open or close meanwhile are harmless: only the
  // request's own connection, open throughout, has this address pair.
  int found = -1;
  std::string host;
  int port = -1;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    const int sock = static_cast<int>(fd);
    if (!Address(sock, getpeername, &host, &port) || port != peer_port || host != peer_addr) continue;
    if (!Address(sock, getsockname, &host, &port) || port != local_port || host != local_addr) continue;
    found = sock;
    break;
  }
  closedir(dir);
  return ClientSocket(found);
}

bool ClientSocket::Gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;  // nothing readable: still connected
  if ((p.revents & (POLLERR | POLLHUP)) != 0) return true;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // end of stream, nothing before it
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace kvedge::server
